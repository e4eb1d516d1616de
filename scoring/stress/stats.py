"""The statistics of a metric stress test: Spearman rho, monotonicity, Cohen's d and the verdict.

Follows section 3.1 of the information-satisfaction paper (seed 002): rho between perturbation
level and mean score, monotonicity M over consecutive levels, pass thresholds |rho| >= 0.4 in the
expected direction (|rho| <= 0.2 for stable tests) and M >= 0.5. Plain numpy/scipy, no Django.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, TypeGuard

import numpy as np
from scipy import stats as sps

from scoring.stress.directions import Direction

__all__ = [
    "DIRECTIONAL_RHO",
    "MONOTONICITY_PASS",
    "STABLE_RHO",
    "STABLE_TOLERANCE",
    "Direction",
    "StressResult",
    "Verdict",
    "cohens_d",
    "level_means",
    "mean_absolute_change",
    "monotonicity",
    "spearman_rho",
    "compute_statistics",
]

DIRECTIONAL_RHO = 0.4
"""A directional test passes rho when |rho| >= 0.4 with the expected sign."""
STABLE_RHO = 0.2
"""A stable test passes rho when |rho| <= 0.2."""
MONOTONICITY_PASS = 0.5
"""A test passes M when at least half of the transitions go the expected way."""
STABLE_TOLERANCE = 0.05
"""A stable transition is correct when |change| < 5% of the baseline mean."""
_EPS = 1e-9


class Verdict(StrEnum):
    PASS = "pass"  # noqa: S105
    FAIL = "fail"
    UNDEFINED = "undefined"
    """The statistic cannot be computed (a constant metric, too few scored levels); counts as a fail."""
    NOT_APPLICABLE = "n/a"
    """The statistic carries no information for this test (rho over only two levels of a stable test)."""


def _finite(x: float | None) -> TypeGuard[float]:
    return x is not None and math.isfinite(x)


def level_means(scores: Sequence[Sequence[float | None]]) -> list[float]:
    """Mean score per level over rows; `scores[row][level]`, None/NaN ignored, NaN when a level has none."""
    if not scores:
        return []
    n_levels = max(len(r) for r in scores)
    means: list[float] = []
    for level in range(n_levels):
        vals = [r[level] for r in scores if level < len(r) and _finite(r[level])]
        means.append(float(np.mean(np.asarray(vals, dtype=float))) if vals else math.nan)
    return means


def spearman_rho(levels: Sequence[float], means: Sequence[float]) -> float:
    """Spearman's rho between level and mean score over the levels whose mean is defined.

    NaN when fewer than two levels are defined or either side is constant (scipy's own convention).
    """
    pairs = [(float(lv), float(m)) for lv, m in zip(levels, means, strict=True) if math.isfinite(m)]
    if len(pairs) < 2:
        return math.nan
    xs = np.asarray([p[0] for p in pairs])
    ys = np.asarray([p[1] for p in pairs])
    if np.ptp(xs) == 0 or np.ptp(ys) == 0:
        return math.nan
    if len(pairs) == 2:
        # scipy needs at least 2 points and returns +-1 here; computed directly to avoid its warning.
        return 1.0 if (xs[1] - xs[0]) * (ys[1] - ys[0]) > 0 else -1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sps.ConstantInputWarning)
        rho = sps.spearmanr(xs, ys).statistic
    return float(rho)


def monotonicity(means: Sequence[float], direction: Direction, *, tolerance: float = STABLE_TOLERANCE) -> float:
    """Share of consecutive transitions whose change matches the expected direction.

    For "stable", a transition matches when |change| < tolerance * |baseline mean| (level 0).
    A transition with an undefined end counts as a miss. NaN when there is no transition,
    or for a stable test whose baseline is undefined.
    """
    transitions = len(means) - 1
    if transitions < 1:
        return math.nan
    baseline = means[0]
    if direction is Direction.STABLE and not math.isfinite(baseline):
        return math.nan
    hits = 0
    for a, b in zip(means[:-1], means[1:], strict=True):
        if not (math.isfinite(a) and math.isfinite(b)):
            continue
        change = b - a
        if direction is Direction.INCREASE:
            hits += change > 0
        elif direction is Direction.DECREASE:
            hits += change < 0
        else:
            hits += abs(change) < tolerance * abs(baseline)
    return hits / transitions


def _paired(baseline: Sequence[float | None], last: Sequence[float | None]) -> tuple[np.ndarray, np.ndarray]:
    keep = [(float(a), float(b)) for a, b in zip(baseline, last, strict=True) if _finite(a) and _finite(b)]
    a = np.asarray([p[0] for p in keep], dtype=float)
    b = np.asarray([p[1] for p in keep], dtype=float)
    return a, b


def cohens_d(baseline: Sequence[float | None], last: Sequence[float | None]) -> float:
    """Cohen's d of last level minus baseline, pooled SD with n-1, over rows scored at both.

    NaN when fewer than two such rows or the pooled SD is zero.
    """
    a, b = _paired(baseline, last)
    n = len(a)
    if n < 2:
        return math.nan
    pooled = math.sqrt((float(np.var(a, ddof=1)) + float(np.var(b, ddof=1))) / 2.0)
    if pooled == 0.0:
        return math.nan
    return (float(np.mean(b)) - float(np.mean(a))) / pooled


def mean_absolute_change(baseline: Sequence[float | None], last: Sequence[float | None]) -> float:
    """Mean over rows of |score(last) - score(baseline)|, as in seed 003; NaN when no row has both."""
    a, b = _paired(baseline, last)
    if len(a) == 0:
        return math.nan
    return float(np.mean(np.abs(b - a)))


def _rho_verdict(rho: float, direction: Direction, n_levels: int) -> Verdict:
    if direction is Direction.STABLE and n_levels == 2:
        return Verdict.NOT_APPLICABLE
    if not math.isfinite(rho):
        return Verdict.UNDEFINED
    # A small tolerance keeps a rho of exactly 0.4 (common with few levels) from failing on rounding.
    if direction is Direction.INCREASE:
        ok = rho >= DIRECTIONAL_RHO - _EPS
    elif direction is Direction.DECREASE:
        ok = rho <= -DIRECTIONAL_RHO + _EPS
    else:
        ok = abs(rho) <= STABLE_RHO + _EPS
    return Verdict.PASS if ok else Verdict.FAIL


def _m_verdict(m: float) -> Verdict:
    if not math.isfinite(m):
        return Verdict.UNDEFINED
    return Verdict.PASS if m >= MONOTONICITY_PASS else Verdict.FAIL


def _overall(rho_v: Verdict, m_v: Verdict) -> Verdict:
    considered = [v for v in (rho_v, m_v) if v is not Verdict.NOT_APPLICABLE]
    if any(v is Verdict.UNDEFINED for v in considered):
        return Verdict.UNDEFINED
    return Verdict.PASS if all(v is Verdict.PASS for v in considered) else Verdict.FAIL


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class StressResult:
    """One metric under one perturbation test, with the figures the paper reports.

    `rho_verdict` and `m_verdict` are the per-statistic cells of the paper's table; `verdict` is
    pass only when every applicable statistic passes, and undefined (a fail) when one is undefined.
    """

    metric: str
    test: str
    direction: Direction
    levels: tuple[str, ...]
    level_means: tuple[float, ...]
    n_rows: int
    n_scored: tuple[int, ...]
    rho: float
    monotonicity: float
    cohens_d: float
    mean_abs_change: float
    rho_verdict: Verdict
    m_verdict: Verdict
    verdict: Verdict
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.PASS

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["direction"] = self.direction.value
        out["levels"] = list(self.levels)
        out["level_means"] = [_num(m) for m in self.level_means]
        out["n_scored"] = list(self.n_scored)
        for key in ("rho", "monotonicity", "cohens_d", "mean_abs_change"):
            out[key] = _num(getattr(self, key))
        out["rho_verdict"] = self.rho_verdict.value
        out["m_verdict"] = self.m_verdict.value
        out["verdict"] = self.verdict.value
        out["passed"] = self.passed
        return out


def compute_statistics(
    scores: Sequence[Sequence[float | None]],
    *,
    metric: str,
    test: str,
    direction: Direction,
    levels: Sequence[str] | None = None,
    tolerance: float = STABLE_TOLERANCE,
    extra: dict[str, Any] | None = None,
) -> StressResult:
    """All statistics for one metric and test from `scores[row][level]` (None where unscored)."""
    means = level_means(scores)
    n_levels = len(means)
    names = tuple(levels) if levels is not None else tuple(str(i) for i in range(n_levels))
    if len(names) != n_levels:
        raise ValueError(f"{len(names)} level names for {n_levels} levels")
    n_scored = tuple(sum(1 for r in scores if lv < len(r) and _finite(r[lv])) for lv in range(n_levels))
    rho = spearman_rho(list(range(n_levels)), means)
    m = monotonicity(means, direction, tolerance=tolerance)
    first = [r[0] if r else None for r in scores]
    last = [r[n_levels - 1] if len(r) == n_levels else None for r in scores]
    rho_v = _rho_verdict(rho, direction, n_levels)
    m_v = _m_verdict(m)
    return StressResult(
        metric=metric,
        test=test,
        direction=direction,
        levels=names,
        level_means=tuple(means),
        n_rows=len(scores),
        n_scored=n_scored,
        rho=rho,
        monotonicity=m,
        cohens_d=cohens_d(first, last) if n_levels >= 2 else math.nan,
        mean_abs_change=mean_absolute_change(first, last) if n_levels >= 2 else math.nan,
        rho_verdict=rho_v,
        m_verdict=m_v,
        verdict=_overall(rho_v, m_v),
        extra=dict(extra or {}),
    )
