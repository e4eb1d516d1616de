"""Metric stress tests: perturb summaries and check that metrics move the way they should.

Seed 002 section 3.1 (distractor, incremental, lengthen, shorten, audience) and seed 003
(meaning-preserving rewrites, retrieval window, claim similarity). Pure Python, no Django.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from scoring.stress.directions import Direction
from scoring.stress.perturb import TESTS, StressError, StressRow, TestSpec

if TYPE_CHECKING:
    from scoring.stress.runner import run_stress
    from scoring.stress.stats import StressResult, Verdict, compute_statistics
    from scoring.stress.types import StressReport

# The runner (the model-server client) and the statistics (numpy, scipy) load on first use, so that a web
# process listing the tests (the research dashboard) does not pay for them.
_LAZY = {
    "StressReport": "scoring.stress.types",
    "run_stress": "scoring.stress.runner",
    "StressResult": "scoring.stress.stats",
    "Verdict": "scoring.stress.stats",
    "compute_statistics": "scoring.stress.stats",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
