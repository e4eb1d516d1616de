"""How a faithful metric should move under a perturbation: its own module, so that the catalogue of tests
(scoring.stress.perturb) loads without numpy and scipy (the research dashboard lists the tests)."""

from __future__ import annotations

from enum import StrEnum


class Direction(StrEnum):
    """How a faithful metric should move as the perturbation level grows."""

    INCREASE = "increase"
    DECREASE = "decrease"
    STABLE = "stable"
