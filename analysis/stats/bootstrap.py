"""Annotator-clustered bootstrap, vectorised: one draw of annotators, reused by every statistic.

Each resample draws ``n_annotators`` annotators with replacement (``Generator.integers``
from ``numpy.random.default_rng(seed)``, shape ``(n_resamples, n_annotators)``) and keeps all
rows of each drawn annotator. A ratio statistic is a sum over rows divided by a sum over rows,
so it is enough to sum each annotator's rows once (an annotators x cells matrix) and multiply
by the resamples x annotators matrix of draw counts.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from analysis.stats.errors import InsufficientDataError
from analysis.stats.small_sample import BOOTSTRAP, CR2_T, ratio_cr2

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ClusterResampler:
    """Draw counts of each annotator in each resample (``weights[b, a]``)."""

    n_clusters: int
    n_resamples: int
    seed: int
    weights: FloatArray

    @classmethod
    def draw(cls, n_clusters: int, *, n_resamples: int, seed: int) -> ClusterResampler:
        if n_clusters < 1:
            raise InsufficientDataError("a clustered bootstrap needs at least one annotator")
        if n_resamples < 1:
            raise ValueError("n_resamples must be positive")
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, n_clusters, size=(n_resamples, n_clusters))
        flat = (np.arange(n_resamples, dtype=np.int64)[:, None] * n_clusters + idx).ravel()
        counts = np.bincount(flat, minlength=n_resamples * n_clusters).reshape(n_resamples, n_clusters)
        return cls(n_clusters=n_clusters, n_resamples=n_resamples, seed=seed, weights=counts.astype(np.float64))

    def indices(self) -> IntArray:
        """The drawn annotator indices, re-drawn from the seed (for reference loops and audits)."""
        rng = np.random.default_rng(self.seed)
        return rng.integers(0, self.n_clusters, size=(self.n_resamples, self.n_clusters)).astype(np.int64)

    def resample_sums(self, per_cluster: FloatArray) -> FloatArray:
        """Per-resample totals of per-annotator sums: ``(clusters, k) -> (resamples, k)``."""
        if per_cluster.shape[0] != self.n_clusters:
            raise ValueError("per-cluster sums do not match the number of annotators")
        return self.weights @ per_cluster


@dataclass(frozen=True)
class RatioBootstrap:
    """Point estimates, percentile intervals and p-values of several ratios at once."""

    numerator: FloatArray
    denominator: FloatArray
    estimate: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray
    p_value: FloatArray
    n_valid: IntArray
    method: str = BOOTSTRAP


def two_sided_p(replicates: FloatArray, estimate: FloatArray, null: FloatArray) -> tuple[FloatArray, IntArray]:
    """Bootstrap p-value of ``estimate == null``, from the bootstrap distribution shifted to the null.

    ``p = (1 + #{b : |theta*_b - theta_hat| >= |theta_hat - null|}) / (1 + B_valid)``, where
    resamples with an undefined ratio (no decided matches drawn) are left out of ``B_valid``.
    """
    valid = np.isfinite(replicates)
    n_valid = valid.sum(axis=0).astype(np.int64)
    distance = np.abs(estimate - null)
    with np.errstate(invalid="ignore"):
        extreme = (np.abs(replicates - estimate) >= distance - 1e-12) & valid
    p = (1.0 + extreme.sum(axis=0)) / (1.0 + n_valid)
    p = np.where(np.isfinite(estimate) & np.isfinite(null) & (n_valid > 0), np.minimum(p, 1.0), np.nan)
    return p.astype(np.float64), n_valid


def percentile_interval(replicates: FloatArray, confidence_level: float) -> tuple[FloatArray, FloatArray]:
    """Percentile interval per column, ignoring undefined resamples (all-undefined gives NaN)."""
    tail = 100.0 * (1.0 - confidence_level) / 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanpercentile(replicates, [tail, 100.0 - tail], axis=0)
    return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)


def bootstrap_ratios(
    numerator: FloatArray,
    denominator: FloatArray,
    *,
    resampler: ClusterResampler,
    null: FloatArray,
    confidence_level: float,
    method: str = BOOTSTRAP,
) -> RatioBootstrap:
    """Ratios ``sum(numerator) / sum(denominator)`` with clustered-bootstrap intervals and p-values.

    ``numerator`` and ``denominator`` are annotators x cells matrices of per-annotator sums.
    ``null`` holds each cell's null value (NaN where no test is wanted). With ``method=CR2_T`` the
    intervals and p-values are CR2 with t(G-1) instead (``small_sample.ratio_cr2``); the resamples
    still count ``n_valid``.
    """
    if method not in (BOOTSTRAP, CR2_T):
        raise ValueError(f"unknown ratio inference method {method!r}")
    num_total = numerator.sum(axis=0)
    den_total = denominator.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = np.where(den_total > 0, num_total / np.where(den_total > 0, den_total, 1.0), np.nan)
        num_b = resampler.resample_sums(numerator)
        den_b = resampler.resample_sums(denominator)
        replicates = np.where(den_b > 0, num_b / np.where(den_b > 0, den_b, 1.0), np.nan)
    low, high = percentile_interval(replicates, confidence_level)
    p, n_valid = two_sided_p(replicates, estimate, null)
    if resampler.n_clusters < 2:
        # One annotator: every resample is the data itself; an interval would claim false precision.
        low = np.full_like(low, np.nan)
        high = np.full_like(high, np.nan)
        p = np.full_like(p, np.nan)
    elif method == CR2_T:
        small = ratio_cr2(numerator, denominator, null=null, confidence_level=confidence_level)
        low, high, p = small.ci_low, small.ci_high, small.p_value
    return RatioBootstrap(
        numerator=num_total,
        denominator=den_total,
        estimate=estimate,
        ci_low=low,
        ci_high=high,
        p_value=p,
        n_valid=n_valid,
        method=method,
    )
