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


def cluster_coincidences(
    data: npt.ArrayLike, domain: FloatArray, clusters: npt.ArrayLike | None = None, n_clusters: int = 1
) -> FloatArray:
    """Coincidence matrices summed within clusters of units: ``(clusters, values, values)``.

    ``o_ck = sum_u sum_{i != j} [v_ui = c][v_uj = k] / (m_u - 1)`` over ordered pairs of distinct coders
    who both coded unit u (``m_u`` coders); a unit coded once is not pairable and adds nothing. Built
    from coder pairs with ``bincount``, so the cost is units x coders^2 whatever the number of values.
    """
    arr = _reliability(data)
    coders, units = arr.shape
    size = domain.size
    codes = np.zeros(units, dtype=np.int64) if clusters is None else np.asarray(clusters, dtype=np.int64)
    coded = np.isfinite(arr)
    idx = np.searchsorted(domain, np.where(coded, arr, domain[0] if size else 0.0)) if size else coded.astype(int)
    m = coded.sum(axis=0)
    weight = np.where(m >= 2, 1.0 / np.maximum(m - 1, 1), 0.0)
    out = np.zeros(n_clusters * size * size, dtype=np.float64)
    for i in range(coders):
        for j in range(coders):
            if i == j:
                continue
            both = coded[i] & coded[j] & (m >= 2)
            flat = (codes[both] * size + idx[i, both]) * size + idx[j, both]
            out += np.bincount(flat, weights=weight[both], minlength=out.size)
    return out.reshape(n_clusters, size, size)


def unit_coincidences(data: npt.ArrayLike, domain: FloatArray) -> FloatArray:
    """Each unit's contribution to the coincidence matrix: ``(units, values, values)``."""
    arr = _reliability(data)
    return cluster_coincidences(arr, domain, np.arange(arr.shape[1]), arr.shape[1])


def distance_matrix(level: Level, domain: FloatArray, margins: FloatArray) -> FloatArray:
    """Squared differences ``d2[..., c, k]`` for the level; ``margins`` are n_c (for ordinal), any leading shape."""
    c, k = domain[:, None], domain[None, :]
    if level == "nominal":
        return np.asarray((c != k).astype(np.float64) * np.ones_like(margins)[..., :, None], dtype=np.float64)
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
    o = cluster_coincidences(arr, domain)[0]
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
    domain: FloatArray | None = None,
) -> AlphaEstimate:
    """Alpha and a percentile interval from resampling clusters of units (annotators) with replacement.

    ``clusters[u]`` is the cluster (annotator index, ``0 .. resampler.n_clusters - 1``) of unit ``u``.
    With one cluster the interval is NaN: every resample is the data itself. ``domain``: the sorted
    possible values when known (e.g. vote codes), instead of the values present.
    """
    lvl = _check_level(level)
    arr = _reliability(data)
    codes = np.asarray(clusters, dtype=np.int64)
    if codes.shape != (arr.shape[1],):
        raise ValueError("clusters must give one cluster per unit")
    domain = value_domain(arr) if domain is None else np.asarray(domain, dtype=np.float64)
    if domain.size < 2:
        nan = float("nan")
        return AlphaEstimate(nan, nan, nan, lvl, resampler.n_resamples, 0)
    per_cluster = cluster_coincidences(arr, domain, codes, resampler.n_clusters)
    return alpha_from_cluster_coincidences(
        per_cluster, resampler=resampler, level=lvl, confidence_level=confidence_level, domain=domain
    )


def alpha_from_cluster_coincidences(
    per_cluster: FloatArray,
    *,
    resampler: ClusterResampler,
    level: str,
    domain: FloatArray,
    confidence_level: float = 0.95,
) -> AlphaEstimate:
    """``clustered_alpha`` from coincidence matrices already summed within clusters (``(clusters, values,
    values)``, e.g. from ``cluster_coincidences`` or counted directly for two coders)."""
    lvl = _check_level(level)
    size = domain.size
    flat = np.asarray(per_cluster, dtype=np.float64).reshape(resampler.n_clusters, size * size)
    estimate = float(alpha_from_coincidences(flat.sum(axis=0).reshape(size, size), lvl, domain))
    boot = resampler.resample_sums(flat).reshape(-1, size, size)
    replicates = alpha_from_coincidences(boot, lvl, domain)
    valid = int(np.isfinite(replicates).sum())
    if resampler.n_clusters < 2 or valid == 0:
        low = high = float("nan")
    else:
        lo, hi = percentile_interval(replicates[:, None], confidence_level)
        low, high = float(lo[0]), float(hi[0])
    return AlphaEstimate(estimate, low, high, lvl, resampler.n_resamples, valid)
