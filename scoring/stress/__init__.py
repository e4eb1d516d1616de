"""Metric stress tests: perturb summaries and check that metrics move the way they should.

Seed 002 section 3.1 (distractor, incremental, lengthen, shorten, audience) and seed 003
(meaning-preserving rewrites, retrieval window, claim similarity). Pure Python, no Django.
"""

from scoring.stress.perturb import TESTS, StressError, StressRow, TestSpec
from scoring.stress.runner import StressReport, run_stress
from scoring.stress.stats import Direction, StressResult, Verdict, compute_statistics

__all__ = [
    "TESTS",
    "Direction",
    "StressError",
    "StressReport",
    "StressResult",
    "StressRow",
    "TestSpec",
    "Verdict",
    "compute_statistics",
    "run_stress",
]
