"""Adjusted p-values for the families of tests an analysis reports (Holm by default, Benjamini-Hochberg as an
option): every table of tests carries the adjusted p-value beside the raw one (docs/analysis.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from analysis.stats._results import ResultMixin

FloatArray = npt.NDArray[np.float64]

HOLM, BH, NONE = "holm", "bh", "none"
MULTIPLICITY_CHOICES: tuple[str, ...] = (HOLM, BH, NONE)
METHOD_NAMES = {
    HOLM: "Holm (family-wise error rate)",
    BH: "Benjamini-Hochberg (false discovery rate)",
    NONE: "none (raw p-values)",
}


def adjust_p_values(p_values: Sequence[float] | npt.ArrayLike, method: str = HOLM) -> FloatArray:
    """Adjusted p-values of one family, in the input's order. Missing p-values (NaN: an undefined test) stay
    missing and are not counted among the family's m tests.

    Holm: the i-th smallest of m becomes ``max_{j <= i} min(1, (m - j + 1) p_(j))``. Benjamini-Hochberg: the
    i-th smallest becomes ``min_{j >= i} min(1, m p_(j) / j)``. ``none`` returns the p-values as they are."""
    if method not in MULTIPLICITY_CHOICES:
        raise ValueError(f"multiplicity must be one of {', '.join(MULTIPLICITY_CHOICES)}, not {method!r}")
    p = np.asarray(p_values, dtype=np.float64).reshape(-1)
    out = np.full(p.shape, np.nan)
    present = np.flatnonzero(np.isfinite(p))
    m = present.size
    if m == 0:
        return out
    if method == NONE:
        out[present] = p[present]
        return out
    order = present[np.argsort(p[present], kind="stable")]
    ranked = p[order]
    rank = np.arange(1, m + 1, dtype=np.float64)
    if method == HOLM:
        adjusted = np.maximum.accumulate(np.minimum(1.0, (m - rank + 1) * ranked))
    else:
        adjusted = np.minimum.accumulate(np.minimum(1.0, m * ranked / rank)[::-1])[::-1]
    out[order] = adjusted
    return out


@dataclass(frozen=True)
class PValueFamily(ResultMixin):
    """One family of tests and how its p-values were adjusted: ``labels`` name the tests, in the order of
    ``p_values`` and ``p_adjusted``; ``m`` counts the tests with a p-value (the others are undefined)."""

    name: str
    description: str
    method: str
    labels: tuple[str, ...]
    p_values: tuple[float, ...]
    p_adjusted: tuple[float, ...]

    @property
    def m(self) -> int:
        return int(np.isfinite(np.asarray(self.p_values, dtype=np.float64)).sum())

    def sentence(self) -> str:
        return f"{self.name}: {self.description}; {self.m} tests, adjusted by {METHOD_NAMES[self.method]}"


def p_value_family(
    *, name: str, description: str, labels: Sequence[str], p_values: Sequence[float], method: str
) -> PValueFamily:
    """A family with its adjusted p-values (``adjust_p_values``)."""
    adjusted = adjust_p_values(list(p_values), method)
    return PValueFamily(
        name=name,
        description=description,
        method=method,
        labels=tuple(labels),
        p_values=tuple(float(p) for p in p_values),
        p_adjusted=tuple(float(p) for p in adjusted),
    )
