"""Krippendorff's alpha at the four levels of measurement, from the coincidence matrix (Krippendorff 2011).

Any number of coders and values, missing data allowed. Because the coincidence matrix is a sum over
units, the annotator-clustered bootstrap sums each cluster's units once and reweights the sums with the
shared ``ClusterResampler`` draw (resample annotators, recompute alpha), with no per-resample loop.

    alpha = 1 - (n - 1) * sum_ck o_ck d2_ck / sum_ck n_c n_k d2_ck

with ``o`` the coincidence matrix, ``n_c`` its margins, ``n`` the number of pairable values and ``d2``
the level's squared difference: nominal 0/1; ordinal ``(sum_{g=c..k} n_g - (n_c + n_k) / 2)^2`` over
ranks; interval ``(c - k)^2``; ratio ``((c - k) / (c + k))^2``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from analysis.stats._results import ResultMixin
from analysis.stats.bootstrap import ClusterResampler, percentile_interval

FloatArray = npt.NDArray[np.float64]
Level = Literal["nominal", "ordinal", "interval", "ratio"]
LEVELS: tuple[Level, ...] = ("nominal", "ordinal", "interval", "ratio")


def _check_level(level: str) -> Level:
    if level not in LEVELS:
        raise ValueError(f"level of measurement must be one of {', '.join(LEVELS)}, not {level!r}")
    return level  # type: ignore[return-value]


def _reliability(data: npt.ArrayLike) -> FloatArray:
    arr = np.asarray(data, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError("reliability data must be a coders x units matrix")
    return arr


def value_domain(data: npt.ArrayLike) -> FloatArray:
    """The sorted distinct values present (NaN = missing)."""
    arr = _reliability(data)
    return np.unique(arr[np.isfinite(arr)])


def unit_coincidences(data: npt.ArrayLike, domain: FloatArray) -> FloatArray:
    """Each unit's contribution to the coincidence matrix: ``(units, values, values)``.

    A unit coded ``m_u >= 2`` times adds ``n_uc n_uk / (m_u - 1)`` to cell (c, k), minus its diagonal
    self-pairs ``n_uc / (m_u - 1)``; a unit coded once is not pairable and adds nothing.
    """
    arr = _reliability(data)
    units = arr.shape[1]
    counts = np.zeros((units, domain.size), dtype=np.float64)
    coded = np.isfinite(arr)
    if domain.size:
        idx = np.searchsorted(domain, np.where(coded, arr, domain[0]))
        for coder in range(arr.shape[0]):
            rows = np.flatnonzero(coded[coder])
            np.add.at(counts, (rows, idx[coder, rows]), 1.0)
    m = counts.sum(axis=1)
    scale = np.where(m >= 2, 1.0 / np.where(m >= 2, m - 1.0, 1.0), 0.0)
    pairs = counts[:, :, None] * counts[:, None, :]
    diag = np.arange(domain.size)
    pairs[:, diag, diag] -= counts
    return pairs * scale[:, None, None]


def distance_matrix(level: Level, domain: FloatArray, margins: FloatArray) -> FloatArray:
    """Squared differences ``d2[..., c, k]`` for the level; ``margins`` are n_c (for ordinal), any leading shape."""
    c, k = domain[:, None], domain[None, :]
    if level == "nominal":
        return (c != k).astype(np.float64) * np.ones_like(margins)[..., :, None]
    if level == "interval":
        return np.broadcast_to((c - k) ** 2, (*margins.shape[:-1], domain.size, domain.size)).copy()
    if level == "ratio":
        with np.errstate(invalid="ignore", divide="ignore"):
            d = np.where(c + k != 0, (c - k) / np.where(c + k != 0, c + k, 1.0), 0.0)
        return np.broadcast_to(d**2, (*margins.shape[:-1], domain.size, domain.size)).copy()
    # ordinal: the sum of margins from rank c to rank k, minus half of the two end margins.
    cum = np.cumsum(margins, axis=-1)
    lo = np.minimum.outer(np.arange(domain.size), np.arange(domain.size))
    hi = np.maximum.outer(np.arange(domain.size), np.arange(domain.size))
    between = cum[..., hi] - cum[..., lo] + margins[..., lo]
    ends = (margins[..., :, None] + margins[..., None, :]) / 2.0
    return np.asarray((between - ends) ** 2, dtype=np.float64)


def alpha_from_coincidences(coincidences: FloatArray, level: Level, domain: FloatArray) -> FloatArray:
    """Alpha of one or many coincidence matrices (``(..., values, values)``); NaN when undefined."""
    o = np.asarray(coincidences, dtype=np.float64)
    margins = o.sum(axis=-1)
    n = margins.sum(axis=-1)
    d2 = distance_matrix(level, domain, margins)
    observed = (o * d2).sum(axis=(-2, -1))
    expected = (margins[..., :, None] * margins[..., None, :] * d2).sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha = 1.0 - (n - 1.0) * observed / expected
    return np.where((expected > 0) & (n > 1), alpha, np.nan).astype(np.float64)


def krippendorff_alpha(data: npt.ArrayLike, level: str = "nominal") -> float:
    """Krippendorff's alpha of a coders x units matrix (NaN = missing) at ``level``.

    NaN when undefined: fewer than two pairable values, or no expected disagreement (one value only).
    """
    lvl = _check_level(level)
    arr = _reliability(data)
    domain = value_domain(arr)
    if lvl == "ratio" and domain.size and domain.min() < 0:
        raise ValueError("ratio alpha needs non-negative values")
    if domain.size < 2:
        return float("nan")
    o = unit_coincidences(arr, domain).sum(axis=0)
    return float(alpha_from_coincidences(o, lvl, domain))


@dataclass(frozen=True)
class AlphaEstimate(ResultMixin):
    """Alpha with its annotator-clustered bootstrap percentile interval."""

    alpha: float
    ci_low: float
    ci_high: float
    level: str
    n_resamples: int
    n_valid_resamples: int


def clustered_alpha(
    data: npt.ArrayLike,
    clusters: Sequence[int] | npt.NDArray[np.int64],
    *,
    resampler: ClusterResampler,
    level: str = "nominal",
    confidence_level: float = 0.95,
) -> AlphaEstimate:
    """Alpha and a percentile interval from resampling clusters of units (annotators) with replacement.

    ``clusters[u]`` is the cluster (annotator index, ``0 .. resampler.n_clusters - 1``) of unit ``u``.
    With one cluster the interval is NaN: every resample is the data itself.
    """
    lvl = _check_level(level)
    arr = _reliability(data)
    codes = np.asarray(clusters, dtype=np.int64)
    if codes.shape != (arr.shape[1],):
        raise ValueError("clusters must give one cluster per unit")
    domain = value_domain(arr)
    if domain.size < 2:
        nan = float("nan")
        return AlphaEstimate(nan, nan, nan, lvl, resampler.n_resamples, 0)
    per_unit = unit_coincidences(arr, domain)
    per_cluster = np.zeros((resampler.n_clusters, domain.size * domain.size), dtype=np.float64)
    np.add.at(per_cluster, codes, per_unit.reshape(per_unit.shape[0], -1))
    estimate = float(alpha_from_coincidences(per_cluster.sum(axis=0).reshape(domain.size, domain.size), lvl, domain))
    boot = resampler.resample_sums(per_cluster).reshape(-1, domain.size, domain.size)
    replicates = alpha_from_coincidences(boot, lvl, domain)
    valid = int(np.isfinite(replicates).sum())
    if resampler.n_clusters < 2 or valid == 0:
        low = high = float("nan")
    else:
        lo, hi = percentile_interval(replicates[:, None], confidence_level)
        low, high = float(lo[0]), float(hi[0])
    return AlphaEstimate(estimate, low, high, lvl, resampler.n_resamples, valid)
