"""Agreement between automatic metrics and the annotators' choices (Krippendorff's alpha, nominal by default).

A metric "votes" on a comparison for the side it scores better (direction from the metric registry),
or "neither" when the two scores are within the metric's similarity threshold; alpha (the project's own
coincidence-matrix implementation, ``analysis.stats.alpha``) is computed between these votes and the
human choices, one metric at a time, with an annotator-clustered bootstrap interval.

The default threshold is ``DEFAULT_SD_FRACTION`` (0.2) times the metric's pooled standard deviation
over the table's candidates: a difference smaller than a "small" standardised effect (Cohen's d = 0.2)
is a tie. A pairwise judge's vote (stored as a 1/0 score pair) always uses threshold 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from analysis.stats._results import ResultMixin, fmt, text_table
from analysis.stats.alpha import alpha_from_cluster_coincidences, alpha_from_coincidences, krippendorff_alpha
from analysis.stats.bootstrap import ClusterResampler
from analysis.stats.errors import AnalysisError
from analysis.stats.metric_info import UNASSIGNED_FAMILY, MetricInfo
from analysis.stats.table import (
    LEFT_PREFIX,
    RIGHT_PREFIX,
    PreparedTable,
    first_appearances,
    metric_names,
    recorded_without_asking,
)

FloatArray = npt.NDArray[np.float64]

VOTE_LEFT, VOTE_RIGHT, VOTE_NEITHER = 0.0, 1.0, 2.0
"""Nominal codes shared by metric votes and human choices (NaN = no vote, e.g. a missing score)."""
DEFAULT_SD_FRACTION = 0.2
"""Default "neither" threshold, in pooled standard deviations of the metric over the candidates."""
DEFAULT_THRESHOLD = 0.0
"""The threshold of a pairwise judge's votes, and of a metric whose scores do not vary."""
SWEEP_MAX_SD = 1.0
"""Threshold sweeps run from 0 to this many pooled standard deviations."""
POSITION_PAIR = ("pairwise_first", "pairwise_swapped")
"""A pairwise judge's two votes, A/B as shown and swapped, compared for position consistency."""

__all__ = [
    "DEFAULT_SD_FRACTION",
    "UNASSIGNED_FAMILY",
    "AgreementResult",
    "ExcludedMetric",
    "FamilyAgreement",
    "MetricAgreement",
    "PositionConsistency",
    "ThresholdAlpha",
    "alpha_threshold_sweep",
    "default_sweep_thresholds",
    "human_votes",
    "metric_agreement",
    "metric_votes",
    "nominal_alpha",
    "pooled_sd",
]


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
    """The annotators' choices as vote codes; NaN (no vote) for a choice the platform recorded without asking
    (an automatic tie between identical summaries): every metric also calls identical texts "neither", so
    counting those ties as the annotator's would raise every metric's agreement with nobody's judgment."""
    votes = np.where(t.left_won, VOTE_LEFT, np.where(t.right_won, VOTE_RIGHT, VOTE_NEITHER)).astype(np.float64)
    votes[recorded_without_asking(t)] = np.nan
    return votes


_CODES = np.asarray([VOTE_LEFT, VOTE_RIGHT, VOTE_NEITHER])
AGREEMENT_LEVELS = ("nominal", "ordinal")
"""How votes are compared. ``nominal`` (the default, as in the papers this reproduces): left, right and neither
are three categories, and a "neither" against a "left" is as wrong as a "right". ``ordinal``: the votes are
ordered left < neither < right, so a "neither" against a "left" is half as wrong as a "right" (Krippendorff's
ordinal metric over that order)."""
_ORDINAL_ORDER = np.asarray([int(VOTE_LEFT), int(VOTE_NEITHER), int(VOTE_RIGHT)])


def _check_agreement_level(level: str) -> str:
    if level not in AGREEMENT_LEVELS:
        raise ValueError(f"agreement level must be one of {', '.join(AGREEMENT_LEVELS)}, not {level!r}")
    return level


def _ordered(o: FloatArray, level: str) -> FloatArray:
    """Coincidence matrices (last two axes indexed by vote code) in the order the level's metric reads them."""
    if level == "ordinal":
        return o[..., _ORDINAL_ORDER, :][..., :, _ORDINAL_ORDER]
    return o


def _vote_alpha(o: FloatArray, level: str) -> float:
    """Alpha of one 3 x 3 coincidence matrix of vote codes at ``level``."""
    return float(alpha_from_coincidences(_ordered(o, level), "ordinal" if level == "ordinal" else "nominal", _CODES))


def nominal_alpha(a: FloatArray, b: FloatArray, *, level: str = "nominal") -> float:
    """Krippendorff's alpha of two coders over the same units (``analysis.stats.alpha``), nominal unless
    ``level="ordinal"`` (vote codes only: left < neither < right).

    NaN when fewer than two units are coded by both or when every pairable value is the same
    (alpha is undefined when there is no expected disagreement).
    """
    level = _check_agreement_level(level)
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    both = np.isfinite(a) & np.isfinite(b)
    if both.sum() < 2:
        return float("nan")
    if np.isin(a[both], _CODES).all() and np.isin(b[both], _CODES).all():
        # Vote codes: the 3 x 3 coincidence matrix directly (each pairable unit adds (a, b) and (b, a)).
        x, y = a[both].astype(np.int64), b[both].astype(np.int64)
        o = (np.bincount(x * 3 + y, minlength=9) + np.bincount(y * 3 + x, minlength=9)).reshape(3, 3)
        return _vote_alpha(o.astype(np.float64), level)
    if level != "nominal":
        raise ValueError("ordinal agreement is defined on vote codes (left, right, neither) only")
    return krippendorff_alpha(np.vstack([a[both], b[both]]), "nominal")


def _vote_coincidences(
    votes: FloatArray, human: FloatArray, coded: npt.NDArray[np.bool_], clusters: npt.NDArray[np.int64], n: int
) -> FloatArray:
    """Per-annotator 3 x 3 coincidence matrices of two coders (metric, human) over the coded units: each
    unit adds one to (vote, human) and one to (human, vote), the coincidence matrix of two coders
    (``alpha.cluster_coincidences`` with m_u = 2), counted with one ``bincount``."""
    x = votes[coded].astype(np.int64)
    y = human[coded].astype(np.int64)
    counts = np.bincount((clusters[coded] * 3 + x) * 3 + y, minlength=n * 9).reshape(n, 3, 3)
    return (counts + counts.transpose(0, 2, 1)).astype(np.float64)


@dataclass(frozen=True)
class MetricAgreement(ResultMixin):
    metric: str
    family: str
    alpha: float
    ci_low: float
    ci_high: float
    threshold: float
    threshold_rule: str
    """How the threshold was chosen: ``0.2 x pooled SD``, ``configured`` or ``vote`` (a judge's vote)."""
    pooled_sd: float
    higher_is_better: bool
    n_units: int
    raw_agreement: float
    metric_left: float
    metric_right: float
    metric_neither: float
    judge: str | None = None


@dataclass(frozen=True)
class ExcludedMetric(ResultMixin):
    """A metric left out of agreement, and why (it cannot differ between the two sides of a match)."""

    metric: str
    family: str
    reason: str


@dataclass(frozen=True)
class PositionConsistency(ResultMixin):
    """How often a pairwise judge gives the same side in both orders (A/B as shown, and swapped)."""

    judge: str
    n_units: int
    rate: float


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
    excluded: tuple[ExcludedMetric, ...] = ()
    position_consistency: tuple[PositionConsistency, ...] = ()
    confidence_level: float = 0.95
    notes: tuple[str, ...] = ()
    level: str = "nominal"
    """``nominal`` or ``ordinal`` (``AGREEMENT_LEVELS``)."""

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
                f"[{fmt(m.ci_low)}, {fmt(m.ci_high)}]",
                f"{fmt(m.threshold, 4)} ({m.threshold_rule})",
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
                f"[{fmt(f.min_alpha)}, {fmt(f.max_alpha)}]",
                "",
                "",
                "",
                "",
            ]
            for f in self.families
        ]
        level = f"{round(100 * self.confidence_level)}%"
        out = (
            f"Krippendorff's alpha ({self.level}), metric votes vs annotator choices ({level} annotator-clustered CI)\n"
        )
        out += text_table(
            ["family", "metric", "alpha", "CI / range", "threshold", "better", "units", "agree"], rows + fam
        )
        for c in self.position_consistency:
            out += f"\npairwise judge {c.judge}: same side in both orders in {fmt(c.rate)} of {c.n_units} matches"
        for e in self.excluded:
            out += f"\nleft out: {e.metric} ({e.reason})"
        return out


@dataclass(frozen=True)
class ThresholdAlpha(ResultMixin):
    metric: str
    threshold: float
    alpha: float
    metric_neither: float
    sd_multiple: float = float("nan")
    """The threshold in pooled standard deviations of the metric (NaN when the SD is 0)."""


def _scores(t: PreparedTable, metric: str) -> tuple[FloatArray, FloatArray]:
    frame = t.frame
    lc, rc = LEFT_PREFIX + metric, RIGHT_PREFIX + metric
    if lc not in frame.columns or rc not in frame.columns:
        raise AnalysisError(f"metric {metric!r} needs columns {lc} and {rc}", extra={"metric": metric})
    left = pd.to_numeric(frame[lc], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    right = pd.to_numeric(frame[rc], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    return left, right


def candidate_index(t: PreparedTable) -> npt.NDArray[np.int64] | None:
    """Positions, in the left-then-right scores of every row, of each candidate's first appearance; None
    when the table does not name its candidates (``left_candidate``/``right_candidate``)."""
    frame = t.frame
    if "left_candidate" not in frame.columns or "right_candidate" not in frame.columns:
        return None
    ids = pd.concat([frame["left_candidate"], frame["right_candidate"]], ignore_index=True)
    codes, _ = pd.factorize(ids, use_na_sentinel=True)
    return first_appearances(codes)


def pooled_sd(t: PreparedTable, metric: str, *, candidates: npt.NDArray[np.int64] | None = None) -> float:
    """Standard deviation of the metric over the table's candidates (each candidate once when the table
    names them in ``left_candidate``/``right_candidate``, else every left and right score).
    ``candidates``: ``candidate_index(t)``, computed once for many metrics."""
    left, right = _scores(t, metric)
    values = np.concatenate([left, right])
    index = candidate_index(t) if candidates is None else candidates
    if index is not None and index.size:
        values = values[index]  # a candidate has one score, whichever row it appears in
    values = values[np.isfinite(values)]
    return float(np.std(values, ddof=1)) if values.size >= 2 else float("nan")


def _share(votes: FloatArray, value: float) -> float:
    coded = np.isfinite(votes)
    return float(np.mean(votes[coded] == value)) if coded.any() else float("nan")


def _family_rows(out: Sequence[MetricAgreement]) -> tuple[FamilyAgreement, ...]:
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
    return tuple(fams)


def metric_agreement(
    t: PreparedTable,
    *,
    metrics: Sequence[str] | None = None,
    info: Mapping[str, MetricInfo] | None = None,
    families: Mapping[str, str] | None = None,
    thresholds: Mapping[str, float] | None = None,
    higher_is_better: Mapping[str, bool] | None = None,
    default_threshold: float | None = None,
    threshold_sd_fraction: float = DEFAULT_SD_FRACTION,
    resampler: ClusterResampler | None = None,
    confidence_level: float = 0.95,
    level: str = "nominal",
) -> AgreementResult:
    """Alpha per metric (all ``left__``/``right__`` pairs unless ``metrics`` is given), grouped by family.

    ``info`` holds the registry's facts (``metric_info.describe_metrics``); ``families`` and
    ``higher_is_better`` override them per metric. Thresholds: ``thresholds[metric]``, else
    ``default_threshold`` when given, else ``threshold_sd_fraction`` x the metric's pooled SD (a judge's
    vote: 0). A metric whose value cannot differ between the sides (registry ``varies_by_side=False``, or
    equal on both sides of every match) is left out with its reason in ``excluded``. With a
    ``resampler`` (annotator-clustered draw) each alpha carries a percentile interval. ``level``: how votes
    are compared (``AGREEMENT_LEVELS``).
    """
    level = _check_agreement_level(level)
    names = tuple(metrics) if metrics is not None else metric_names(t.frame)
    if not names:
        raise AnalysisError("the comparison table has no metric columns (left__<metric>, right__<metric>)")
    if threshold_sd_fraction < 0:
        raise ValueError("threshold_sd_fraction must be non-negative")
    info = info or {}
    families = families or {}
    thresholds = thresholds or {}
    higher_is_better = higher_is_better or {}
    human = human_votes(t)
    candidates = candidate_index(t)
    out: list[MetricAgreement] = []
    excluded: list[ExcludedMetric] = []
    votes_of: dict[str, FloatArray] = {}
    for name in names:
        facts = info.get(name)
        family = str(families.get(name, facts.family if facts else UNASSIGNED_FAMILY))
        left, right = _scores(t, name)
        both = np.isfinite(left) & np.isfinite(right)
        if facts is not None and not facts.varies_by_side:
            excluded.append(
                ExcludedMetric(
                    name, family, "depends only on inputs both sides of a match share (reference and source)"
                )
            )
            continue
        is_vote = facts is not None and facts.is_vote
        if not is_vote and both.any() and np.array_equal(left[both], right[both]):
            excluded.append(ExcludedMetric(name, family, "equal on both sides of every match in this table"))
            continue
        sd = pooled_sd(t, name, candidates=candidates)
        if name in thresholds:
            thr, rule = float(thresholds[name]), "configured"
        elif is_vote:
            thr, rule = DEFAULT_THRESHOLD, "vote"
        elif default_threshold is not None:
            thr, rule = float(default_threshold), "configured"
        else:
            thr = threshold_sd_fraction * sd if np.isfinite(sd) else DEFAULT_THRESHOLD
            rule = f"{threshold_sd_fraction:g} x pooled SD"
        hib = bool(higher_is_better.get(name, facts.higher_is_better if facts else True))
        votes = metric_votes(left, right, threshold=thr, higher_is_better=hib)
        if facts is not None and facts.metric in POSITION_PAIR:
            votes_of[name] = votes  # kept only for the judge's position consistency (one column per metric)
        coded = np.isfinite(votes) & np.isfinite(human)
        n = int(coded.sum())
        if resampler is not None:
            estimate = alpha_from_cluster_coincidences(
                _ordered(_vote_coincidences(votes, human, coded, t.annotator_code, t.n_annotators), level),
                resampler=resampler,
                level=level,
                confidence_level=confidence_level,
                domain=_CODES,
            )
            alpha, low, high = estimate.alpha, estimate.ci_low, estimate.ci_high
        else:
            alpha, low, high = nominal_alpha(votes, human, level=level), float("nan"), float("nan")
        out.append(
            MetricAgreement(
                metric=name,
                family=family,
                alpha=alpha,
                ci_low=low,
                ci_high=high,
                threshold=thr,
                threshold_rule=rule,
                pooled_sd=sd,
                higher_is_better=hib,
                n_units=n,
                raw_agreement=float(np.mean(votes[coded] == human[coded])) if n else float("nan"),
                metric_left=_share(votes, VOTE_LEFT),
                metric_right=_share(votes, VOTE_RIGHT),
                metric_neither=_share(votes, VOTE_NEITHER),
                judge=facts.judge if facts else None,
            )
        )
    out.sort(key=lambda m: (m.family, m.metric))
    notes = []
    for name in names:
        if name not in info or info[name].known:
            continue
        assumed = [
            what
            for what, given in ((f"family {UNASSIGNED_FAMILY!r}", families), ("higher is better", higher_is_better))
            if name not in given
        ]
        if assumed:
            notes.append(
                f"metric {name!r} is not in the metric registry: {' and '.join(assumed)} assumed "
                "(set metric_families / higher_is_better in the analysis settings to say otherwise)"
            )
    return AgreementResult(
        metrics=tuple(out),
        families=_family_rows(out),
        human_left=float(t.left_won.mean()),
        human_right=float(t.right_won.mean()),
        human_neither=float(t.neither.mean()),
        n_comparisons=t.n_rows,
        excluded=tuple(excluded),
        position_consistency=_position_consistency(votes_of, info),
        confidence_level=confidence_level,
        notes=tuple(notes),
        level=level,
    )


def _position_consistency(
    votes_of: Mapping[str, FloatArray], info: Mapping[str, MetricInfo]
) -> tuple[PositionConsistency, ...]:
    first = {i.judge: col for col, i in info.items() if i.metric == POSITION_PAIR[0] and col in votes_of}
    swapped = {i.judge: col for col, i in info.items() if i.metric == POSITION_PAIR[1] and col in votes_of}
    out = []
    for judge in sorted(j for j in first if j in swapped and j is not None):
        a, b = votes_of[first[judge]], votes_of[swapped[judge]]
        both = np.isfinite(a) & np.isfinite(b)
        n = int(both.sum())
        out.append(PositionConsistency(judge, n, float(np.mean(a[both] == b[both])) if n else float("nan")))
    return tuple(out)


def alpha_threshold_sweep(
    t: PreparedTable,
    metric: str,
    thresholds: Sequence[float],
    *,
    higher_is_better: bool = True,
    sd: float | None = None,
    level: str = "nominal",
) -> tuple[ThresholdAlpha, ...]:
    """Alpha of one metric at each candidate threshold (to choose or report the threshold), at ``level``."""
    level = _check_agreement_level(level)
    left, right = _scores(t, metric)
    sd = pooled_sd(t, metric) if sd is None else sd
    # The differences and the human codes once; per threshold only the votes change (3 x 3 coincidences).
    diff = left - right if higher_is_better else right - left
    human_all = human_votes(t)
    ok = np.isfinite(diff) & np.isfinite(human_all)
    magnitude = np.abs(diff[ok])
    side = np.where(diff[ok] > 0, int(VOTE_LEFT), int(VOTE_RIGHT))
    human = human_all[ok].astype(np.int64)
    # Per (side, human) group, the sorted magnitudes: how many become "neither" at a threshold is one
    # binary search, so each threshold costs O(log n) instead of a pass over the comparisons.
    groups = side * 3 + human
    by_group = [np.sort(magnitude[groups == g]) for g in range(6)]
    out = []
    for thr in thresholds:
        if thr < 0:
            raise ValueError("threshold must be non-negative")
        counts = np.zeros((3, 3), dtype=np.int64)
        for vote_side in (int(VOTE_LEFT), int(VOTE_RIGHT)):
            for h in range(3):
                sorted_mag = by_group[vote_side * 3 + h]
                tied = int(np.searchsorted(sorted_mag, float(thr), side="right"))
                counts[vote_side, h] += sorted_mag.size - tied
                counts[int(VOTE_NEITHER), h] += tied
        o = counts + counts.T
        n_votes = int(magnitude.size)
        alpha = _vote_alpha(o.astype(np.float64), level) if n_votes >= 2 else float("nan")
        neither_share = float(counts[int(VOTE_NEITHER)].sum() / n_votes) if n_votes else float("nan")
        out.append(
            ThresholdAlpha(
                metric=metric,
                threshold=float(thr),
                alpha=alpha,
                metric_neither=neither_share,
                sd_multiple=float(thr) / sd if np.isfinite(sd) and sd > 0 else float("nan"),
            )
        )
    return tuple(out)


def default_sweep_thresholds(
    t: PreparedTable, metric: str, n: int = 11, *, sd: float | None = None
) -> tuple[float, ...]:
    """``n`` thresholds evenly spaced from 0 to ``SWEEP_MAX_SD`` pooled standard deviations of the metric."""
    sd = pooled_sd(t, metric) if sd is None else sd
    top = SWEEP_MAX_SD * sd if np.isfinite(sd) else 0.0
    return tuple(float(x) for x in np.linspace(0.0, top, max(n, 1)))
