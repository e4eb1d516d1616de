"""Agreement between automatic metrics and the annotators' choices (Krippendorff's alpha, nominal).

A metric "votes" on a comparison for the side it scores higher, or "neither" when the two scores are
within the metric's similarity threshold; alpha is computed between these votes and the human choices
with the ``krippendorff`` package, one metric at a time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import krippendorff
import numpy as np
import numpy.typing as npt
import pandas as pd

from analysis.stats._results import ResultMixin, fmt, text_table
from analysis.stats.errors import AnalysisError
from analysis.stats.table import LEFT_PREFIX, RIGHT_PREFIX, PreparedTable, metric_names

FloatArray = npt.NDArray[np.float64]

VOTE_LEFT, VOTE_RIGHT, VOTE_NEITHER = 0.0, 1.0, 2.0
"""Nominal codes shared by metric votes and human choices (NaN = no vote, e.g. a missing score)."""
DEFAULT_THRESHOLD = 0.0
"""Default similarity threshold: only exactly equal scores vote "neither"."""
UNASSIGNED_FAMILY = "unassigned"


def metric_votes(
    left: npt.ArrayLike, right: npt.ArrayLike, *, threshold: float = DEFAULT_THRESHOLD, higher_is_better: bool = True
) -> FloatArray:
    """Vote codes for each comparison: the better-scoring side, or neither within ``threshold``."""
    if threshold < 0:
        raise ValueError("threshold must be non-negative")
    lft = np.asarray(left, dtype=np.float64)
    rgt = np.asarray(right, dtype=np.float64)
    diff = lft - rgt if higher_is_better else rgt - lft
    votes = np.where(np.abs(diff) <= threshold, VOTE_NEITHER, np.where(diff > 0, VOTE_LEFT, VOTE_RIGHT))
    return np.where(np.isfinite(diff), votes, np.nan).astype(np.float64)


def human_votes(t: PreparedTable) -> FloatArray:
    return np.where(t.left_won, VOTE_LEFT, np.where(t.right_won, VOTE_RIGHT, VOTE_NEITHER)).astype(np.float64)


def nominal_alpha(a: FloatArray, b: FloatArray) -> float:
    """Krippendorff's alpha (nominal) of two coders over the same units, via the ``krippendorff`` package.

    NaN when fewer than two units are coded by both or when every pairable value is the same
    (alpha is undefined when there is no expected disagreement).
    """
    both = np.isfinite(a) & np.isfinite(b)
    if both.sum() < 2:
        return float("nan")
    # Hand the package value counts of the pairable units (units x values) directly: the same input it
    # builds from reliability data (units coded once add nothing), without its value-domain search.
    counts = np.zeros((int(both.sum()), 3), dtype=np.int64)
    rows = np.arange(counts.shape[0])
    counts[rows, a[both].astype(np.int64)] += 1
    counts[rows, b[both].astype(np.int64)] += 1
    if np.count_nonzero(counts.sum(axis=0)) < 2:
        return float("nan")
    return float(krippendorff.alpha(value_counts=counts, level_of_measurement="nominal"))


@dataclass(frozen=True)
class MetricAgreement(ResultMixin):
    metric: str
    family: str
    alpha: float
    threshold: float
    higher_is_better: bool
    n_units: int
    raw_agreement: float
    metric_left: float
    metric_right: float
    metric_neither: float


@dataclass(frozen=True)
class FamilyAgreement(ResultMixin):
    family: str
    n_metrics: int
    mean_alpha: float
    min_alpha: float
    max_alpha: float


@dataclass(frozen=True)
class AgreementResult(ResultMixin):
    metrics: tuple[MetricAgreement, ...]
    families: tuple[FamilyAgreement, ...]
    human_left: float
    human_right: float
    human_neither: float
    n_comparisons: int

    def get(self, metric: str) -> MetricAgreement:
        for m in self.metrics:
            if m.metric == metric:
                return m
        raise KeyError(metric)

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([m.to_dict() for m in self.metrics])

    def summary(self) -> str:
        rows = [
            [
                m.family,
                m.metric,
                fmt(m.alpha),
                fmt(m.threshold, 4),
                "higher" if m.higher_is_better else "lower",
                str(m.n_units),
                fmt(m.raw_agreement),
            ]
            for m in self.metrics
        ]
        fam = [
            [
                f.family,
                f"({f.n_metrics} metrics)",
                fmt(f.mean_alpha),
                "",
                "",
                "",
                f"[{fmt(f.min_alpha)}, {fmt(f.max_alpha)}]",
            ]
            for f in self.families
        ]
        return "Krippendorff's alpha (nominal), metric votes vs annotator choices\n" + text_table(
            ["family", "metric", "alpha", "threshold", "better", "units", "agree"], rows + fam
        )


@dataclass(frozen=True)
class ThresholdAlpha(ResultMixin):
    metric: str
    threshold: float
    alpha: float
    metric_neither: float


def _scores(t: PreparedTable, metric: str) -> tuple[FloatArray, FloatArray]:
    frame = t.frame
    lc, rc = LEFT_PREFIX + metric, RIGHT_PREFIX + metric
    if lc not in frame.columns or rc not in frame.columns:
        raise AnalysisError(f"metric {metric!r} needs columns {lc} and {rc}", extra={"metric": metric})
    left = pd.to_numeric(frame[lc], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    right = pd.to_numeric(frame[rc], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    return left, right


def metric_agreement(
    t: PreparedTable,
    *,
    metrics: Sequence[str] | None = None,
    families: Mapping[str, str] | None = None,
    thresholds: Mapping[str, float] | None = None,
    higher_is_better: Mapping[str, bool] | None = None,
    default_threshold: float = DEFAULT_THRESHOLD,
) -> AgreementResult:
    """Alpha per metric (all ``left__``/``right__`` pairs unless ``metrics`` is given), grouped by family."""
    names = tuple(metrics) if metrics is not None else metric_names(t.frame)
    if not names:
        raise AnalysisError("the comparison table has no metric columns (left__<metric>, right__<metric>)")
    families = families or {}
    thresholds = thresholds or {}
    higher_is_better = higher_is_better or {}
    human = human_votes(t)
    out: list[MetricAgreement] = []
    for name in names:
        left, right = _scores(t, name)
        thr = float(thresholds.get(name, default_threshold))
        hib = bool(higher_is_better.get(name, True))
        votes = metric_votes(left, right, threshold=thr, higher_is_better=hib)
        coded = np.isfinite(votes)
        n = int(coded.sum())
        share = [
            float(np.mean(votes[coded] == v)) if n else float("nan") for v in (VOTE_LEFT, VOTE_RIGHT, VOTE_NEITHER)
        ]
        out.append(
            MetricAgreement(
                metric=name,
                family=str(families.get(name, UNASSIGNED_FAMILY)),
                alpha=nominal_alpha(votes, human),
                threshold=thr,
                higher_is_better=hib,
                n_units=n,
                raw_agreement=float(np.mean(votes[coded] == human[coded])) if n else float("nan"),
                metric_left=share[0],
                metric_right=share[1],
                metric_neither=share[2],
            )
        )
    out.sort(key=lambda m: (m.family, m.metric))
    fams: list[FamilyAgreement] = []
    for fam in sorted({m.family for m in out}):
        alphas = np.asarray([m.alpha for m in out if m.family == fam], dtype=np.float64)
        finite = alphas[np.isfinite(alphas)]
        fams.append(
            FamilyAgreement(
                family=fam,
                n_metrics=int(alphas.size),
                mean_alpha=float(finite.mean()) if finite.size else float("nan"),
                min_alpha=float(finite.min()) if finite.size else float("nan"),
                max_alpha=float(finite.max()) if finite.size else float("nan"),
            )
        )
    return AgreementResult(
        metrics=tuple(out),
        families=tuple(fams),
        human_left=float(t.left_won.mean()),
        human_right=float(t.right_won.mean()),
        human_neither=float(t.neither.mean()),
        n_comparisons=t.n_rows,
    )


def alpha_threshold_sweep(
    t: PreparedTable, metric: str, thresholds: Sequence[float], *, higher_is_better: bool = True
) -> tuple[ThresholdAlpha, ...]:
    """Alpha of one metric at each candidate threshold (to choose or report the threshold)."""
    left, right = _scores(t, metric)
    human = human_votes(t)
    out = []
    for thr in thresholds:
        votes = metric_votes(left, right, threshold=float(thr), higher_is_better=higher_is_better)
        coded = np.isfinite(votes)
        out.append(
            ThresholdAlpha(
                metric=metric,
                threshold=float(thr),
                alpha=nominal_alpha(votes, human),
                metric_neither=float(np.mean(votes[coded] == VOTE_NEITHER)) if coded.any() else float("nan"),
            )
        )
    return tuple(out)


def default_sweep_thresholds(t: PreparedTable, metric: str, n: int = 11) -> tuple[float, ...]:
    """Thresholds from 0 to the 50th percentile of |left - right| for this metric, evenly spaced."""
    left, right = _scores(t, metric)
    diff = np.abs(left - right)
    diff = diff[np.isfinite(diff)]
    top = float(np.quantile(diff, 0.5)) if diff.size else 0.0
    return tuple(float(x) for x in np.linspace(0.0, top, n))
