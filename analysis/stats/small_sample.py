"""Small-sample cluster-robust inference: CR2 (Bell-McCaffrey) variances with t(G-1) reference distributions.

With few annotators the clustered percentile bootstrap and the CR1 logit with normal critical values
reject a true null far more often than their nominal level (see ``bench/small_sample.py``). CR2
(Bell & McCaffrey 2002; Pustejovsky & Tipton 2018) rescales each annotator's residuals by
``(I - H_gg)^(-1/2)``, which makes the variance unbiased under a working model, and the t distribution
with ``G - 1`` degrees of freedom replaces the normal one.

Ratios ``sum(numerator) / sum(denominator)`` (every win rate) are weighted-least-squares intercepts of
the per-annotator ratios with weights ``denominator_g``; their leverage is ``h_g = D_g / D``, so CR2 is
``sum_g (N_g - R D_g)^2 / (1 - h_g) / D^2`` from the per-annotator sums alone. For a logit (GLM) the
working-weights hat matrix is used, as in clubSandwich's ``vcovCR(glm, type = "CR2")``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

BOOTSTRAP = "cluster-bootstrap"
"""The percentile annotator-clustered bootstrap (intervals) with the shifted-bootstrap p-value."""
CR2_T = "cr2-t"
"""CR2 standard errors with a t(G-1) reference distribution."""
CR1_NORMAL = "cr1-normal"
"""statsmodels' default cluster-robust covariance (CR1) with normal critical values."""

DEFAULT_SMALL_SAMPLE_BELOW = 40
"""Fewer annotators than this: CR2 with t(G-1) is the default and the report warns. Chosen from
``bench/small_sample.py``: the clustered bootstrap rejects a true null in 7.5% of studies at G = 20 and
5.5% at G = 40 (docs/analysis.md has the table)."""

INFERENCE_CHOICES = ("auto", "small-sample", "standard")
"""``AnalysisConfig.inference``: by the number of annotators, always CR2-t, or always the bootstrap/CR1."""


def use_small_sample(n_annotators: int, *, inference: str, below: int) -> bool:
    """Whether CR2-t is used for ``n_annotators`` clusters under an ``inference`` setting."""
    if inference not in INFERENCE_CHOICES:
        raise ValueError(f"inference must be one of {', '.join(INFERENCE_CHOICES)}, not {inference!r}")
    if inference == "small-sample":
        return True
    if inference == "standard":
        return False
    return n_annotators < below


def few_annotators_warning(n_annotators: int, *, below: int, small_sample: bool) -> str | None:
    """The report's warning when clusters are few (``None`` when there are enough)."""
    if n_annotators >= below or n_annotators < 2:
        return None
    if small_sample:
        how = (
            f"intervals and p-values use small-sample inference (CR2 standard errors, t with {n_annotators - 1} "
            "degrees of freedom)"
        )
    else:
        how = (
            "small-sample inference was switched off (inference='standard'), so the clustered bootstrap and "
            "the CR1 logit p-values are too liberal here"
        )
    return (
        f"few annotators: {n_annotators} (fewer than {below}); {how}. Bradley-Terry intervals still come from "
        "the clustered bootstrap and are too narrow. Results rest on few independent judges: one annotator can "
        "move them."
    )


@dataclass(frozen=True)
class RatioCR2:
    """CR2-t inference for several ratios at once (one column per cell)."""

    estimate: FloatArray
    std_error: FloatArray
    df: IntArray
    ci_low: FloatArray
    ci_high: FloatArray
    p_value: FloatArray


def ratio_cr2(
    numerator: FloatArray,
    denominator: FloatArray,
    *,
    null: FloatArray,
    confidence_level: float,
    bounds: tuple[float, float] = (0.0, 1.0),
) -> RatioCR2:
    """CR2 standard errors, t(G-1) intervals (clipped to ``bounds``) and two-sided p-values for ratios.

    ``numerator``/``denominator`` are annotators x cells matrices of per-annotator sums; ``G`` counts the
    annotators with a positive denominator in the cell. Where every such annotator has the same ratio the
    standard error is zero: the interval is undefined (NaN), not a point, and the p-value is the sign-flip
    randomisation test's ``2 / 2^G`` (1 when the ratio equals the null).
    """
    num = np.asarray(numerator, dtype=np.float64)
    den = np.asarray(denominator, dtype=np.float64)
    total = den.sum(axis=0)
    present = den > 0
    g = present.sum(axis=0).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        est = np.where(total > 0, num.sum(axis=0) / np.where(total > 0, total, 1.0), np.nan)
        resid = num - est[None, :] * den
        lev = den / np.where(total > 0, total, 1.0)[None, :]
        # A cluster holding all the weight has leverage 1: its residual is 0 and it adds nothing.
        scaled = np.where(present & (lev < 1.0), resid**2 / np.where(lev < 1.0, 1.0 - lev, 1.0), 0.0)
        var = scaled.sum(axis=0) / np.where(total > 0, total, 1.0) ** 2
    se = np.sqrt(var)
    df = np.maximum(g - 1, 0)
    ok = (g >= 2) & np.isfinite(est) & (se > 1e-14)
    safe_df = np.where(ok, df, 1)
    crit = sps.t.ppf(0.5 + confidence_level / 2.0, safe_df)
    low = np.where(ok, np.clip(est - crit * se, *bounds), np.nan)
    high = np.where(ok, np.clip(est + crit * se, *bounds), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = (est - null) / np.where(ok, se, 1.0)
    p = np.where(ok & np.isfinite(null), 2.0 * sps.t.sf(np.abs(t), safe_df), np.nan)
    # No spread (every annotator has the same ratio): the t statistic is undefined, but the sign-flip
    # randomisation test of the annotators' scores N_g - null D_g is not: they all share one sign, which
    # has probability 2 / 2^G when annotators are exchangeable about the null.
    flat = (g >= 2) & np.isfinite(est) & ~ok & np.isfinite(null)
    same = np.where(np.abs(est - null) < 1e-12, 1.0, np.minimum(1.0, 2.0 ** (1.0 - g.astype(np.float64))))
    p = np.where(flat, same, p)
    return RatioCR2(
        estimate=est.astype(np.float64),
        std_error=np.where(ok, se, np.nan).astype(np.float64),
        df=df,
        ci_low=low.astype(np.float64),
        ci_high=high.astype(np.float64),
        p_value=np.minimum(p, 1.0).astype(np.float64),
    )


def _inverse_sqrt(matrix: FloatArray) -> FloatArray:
    """Symmetric ``matrix^(+1/2)`` inverse (Moore-Penrose: directions with eigenvalue ~0 get 0)."""
    evals, evecs = np.linalg.eigh((matrix + matrix.T) / 2.0)
    scale = evals.max(initial=0.0)
    inv_root = np.where(evals > 1e-12 * max(scale, 1e-300), 1.0 / np.sqrt(np.clip(evals, 1e-300, None)), 0.0)
    return np.asarray((evecs * inv_root) @ evecs.T, dtype=np.float64)


def _cr2_adjust(u: FloatArray, e: FloatArray, theta: FloatArray, bread: FloatArray) -> FloatArray:
    """``A_g e_g`` for one cluster: ``A_g = R G^(+1/2) R``, ``R = Theta^(1/2)``, ``G = Theta^2 - R U M U' R``.

    Rows with the same design row and target (a logit on categorical factors has a handful) are grouped:
    ``R U M U' R`` only acts on the span of the groups' indicator vectors, and on the contrasts within a
    group ``G`` is ``theta_k^2``, so only a K x K matrix (K groups) needs an eigendecomposition.
    """
    root = np.sqrt(theta)
    _, first, pattern = np.unique(np.column_stack([u, theta]), axis=0, return_index=True, return_inverse=True)
    pattern = pattern.reshape(-1)
    counts = np.bincount(pattern).astype(np.float64)
    x = root * e
    mean = np.bincount(pattern, weights=x) / counts
    within = x - mean[pattern]
    z = root[first, None] * u[first] * np.sqrt(counts)[:, None]  # N^(1/2) R U per group
    g_small = np.diag(theta[first] ** 2) - z @ bread @ z.T
    span = _inverse_sqrt(g_small) @ (np.sqrt(counts) * mean)
    adjusted = (span / np.sqrt(counts))[pattern] + within / theta
    return np.asarray(root * adjusted, dtype=np.float64)


def cluster_vcov(
    design: FloatArray,
    resid: FloatArray,
    groups: npt.ArrayLike,
    *,
    weights: FloatArray | None = None,
    kind: str = "CR2",
) -> FloatArray:
    """Cluster-robust covariance of an estimating equation ``sum_g U_g' W_g e_g = 0``, as clubSandwich has it.

    OLS: ``design`` = X, ``resid`` = y - X b, no weights. A GLM (clubSandwich's ``vcovCR.glm``): ``design`` =
    ``dmu/deta * X``, ``resid`` = y - mu, ``weights`` = 1 / V(mu) (for a logit ``V = dmu/deta = mu (1 - mu)``).
    Bread ``M = (U'WU)^-1``; meat ``sum_g U_g' W_g A_g e_g e_g' A_g' W_g U_g`` with ``A_g = I`` (CR0; CR1
    multiplies by statsmodels' ``G/(G-1) (N-1)/(N-p)``) or, for CR2 (Pustejovsky & Tipton 2018, the
    inverse-variance case: working variance ``Theta = W^-1``), ``A_g = R_g' G_g^(+1/2) R_g`` with
    ``R_g = Theta_g^(1/2)``, ``G_g = R_g (I - H)_gg Theta_g R_g'`` and ``H_gg = U_g M U_g' W_g``.
    """
    u = np.asarray(design, dtype=np.float64)
    e = np.asarray(resid, dtype=np.float64)
    n, p = u.shape
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    if kind not in ("CR0", "CR1", "CR2"):
        raise ValueError(f"unknown cluster-robust covariance {kind!r}")
    bread = np.asarray(np.linalg.pinv(u.T @ (w[:, None] * u)), dtype=np.float64)
    codes, inverse = np.unique(np.asarray(groups), return_inverse=True)
    inverse = inverse.reshape(-1)
    n_groups = len(codes)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(n_groups + 1))
    scores = np.zeros((n_groups, p))
    for k in range(n_groups):
        rows = order[bounds[k] : bounds[k + 1]]
        ug, eg, wg = u[rows], e[rows], w[rows]
        if kind == "CR2":
            eg = _cr2_adjust(ug, eg, 1.0 / wg, bread)
        scores[k] = ug.T @ (wg * eg)
    meat = scores.T @ scores
    vcov = bread @ meat @ bread
    if kind == "CR1" and n_groups > 1 and n > p:
        vcov = vcov * (n_groups / (n_groups - 1)) * ((n - 1) / (n - p))
    return np.asarray(vcov, dtype=np.float64)
