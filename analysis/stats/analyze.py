"""One entry point: a comparison table in, every statistic of the report out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pandas as pd

from analysis.stats._results import ResultMixin, fmt_p, json_safe
from analysis.stats.agreement import (
    AgreementResult,
    ThresholdAlpha,
    alpha_threshold_sweep,
    default_sweep_thresholds,
    metric_agreement,
)
from analysis.stats.annotators import AnnotatorSummary, PageTime, annotator_breakdown, page_time_summary, page_times
from analysis.stats.bootstrap import ClusterResampler
from analysis.stats.bradley_terry import BradleyTerryResult, bradley_terry
from analysis.stats.config import AnalysisConfig
from analysis.stats.errors import AnalysisError
from analysis.stats.estimand import BRADLEY_TERRY, OUTSIDE_DESIGN, WIN_RATES, Estimand, estimand_of
from analysis.stats.exclusion import ExclusionSummary
from analysis.stats.metric_info import describe_metrics
from analysis.stats.multiplicity import PValueFamily, p_value_family
from analysis.stats.provenance import Provenance, code_version, now_iso, table_checksum
from analysis.stats.regression import LogisticRegressionResult, fit_personalization_logit
from analysis.stats.small_sample import BOOTSTRAP, CR2_T, few_annotators_warning, use_small_sample
from analysis.stats.table import MIXED_DESIGN, has_conditions, metric_names, placement_recorded, prepare_table
from analysis.stats.win_rates import StageSummary, WinRateTable, stage_summaries, win_rates

T = TypeVar("T")


@dataclass(frozen=True)
class AnalysisReport(ResultMixin):
    """Every statistic of one analysis; sections that could not be computed are ``None`` with a note."""

    provenance: Provenance
    config: AnalysisConfig
    stages: tuple[StageSummary, ...]
    win_rates: WinRateTable
    regression: LogisticRegressionResult | None
    agreement: AgreementResult | None
    threshold_sweeps: tuple[ThresholdAlpha, ...]
    bradley_terry: BradleyTerryResult | None
    annotators: tuple[AnnotatorSummary, ...]
    page_times: tuple[PageTime, ...]
    notes: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    """What a reader must see before the numbers (e.g. few annotators); shown above the win rates."""
    exclusion: ExclusionSummary | None = None
    """The exclusion rule applied before every statistic and what it left out; None: no rule was applied
    (a table from a file carries no quality flags)."""
    regression_family: PValueFamily | None = None
    """The regression's coefficients as one family of tests, with their adjusted p-values (in the order of
    ``regression.coefficients``); the win rates' families are ``win_rates.families``."""
    estimand: Estimand = Estimand(design=OUTSIDE_DESIGN, headline=WIN_RATES, sentence="")
    """The design that chose the pairs and the statistic that is the headline for it (``analysis.stats.estimand``):
    per-stage win rates for brackets, Bradley-Terry strengths for the adaptive design."""

    @property
    def test_families(self) -> tuple[PValueFamily, ...]:
        """Every family of tests in the report, win rates first."""
        return self.win_rates.families + ((self.regression_family,) if self.regression_family else ())

    def to_dict(self) -> dict[str, Any]:
        out = json_safe({k: getattr(self, k) for k in self.__dataclass_fields__ if k != "config"})
        assert isinstance(out, dict)
        out["config"] = self.config.to_dict()
        return out

    def summary(self) -> str:
        p = self.provenance
        parts = [
            f"Analysis of {p.n_rows} comparisons ({p.n_decided} decided, {p.n_neither} neither"
            + (f", {p.n_tie} tie" if p.n_tie else "")
            + ") from "
            f"{p.n_annotators} annotators; table sha256 {p.table_sha256[:16]}...; code {p.code_version}; "
            f"seed {p.seed}; {p.n_resamples} resamples; created {p.created_at}",
            *(f"WARNING: {w}" for w in self.warnings),
            f"Estimand: {self.estimand.sentence}",
            "Stages: "
            + ", ".join(
                f"{s.stage} {s.matches} matches ({s.decided} decided, {s.neither} neither)" for s in self.stages
            ),
            self.exclusion.sentence() if self.exclusion else "Exclusion rule: none applied.",
        ]
        # The headline first: Bradley-Terry before the win rates where the design makes it the estimate to report.
        strengths_first = self.estimand.headline == BRADLEY_TERRY
        if strengths_first and self.bradley_terry is not None:
            parts.append(self.bradley_terry.summary())
        parts.append(self.win_rates.summary())
        for section in (self.regression, self.agreement, None if strengths_first else self.bradley_terry):
            if section is not None:
                parts.append(section.summary())
            if section is self.regression and self.regression_family is not None:
                family = self.regression_family
                parts.append(
                    f"Regression p-values adjusted ({family.sentence()}): "
                    + ", ".join(f"{t} {fmt_p(p)}" for t, p in zip(family.labels, family.p_adjusted, strict=True))
                )
        parts.append(page_time_summary(self.page_times))
        if self.notes:
            parts.append("Notes:\n" + "\n".join(f"- {n}" for n in self.notes))
        return "\n\n".join(parts)


def _section(name: str, notes: list[str], compute: Callable[[], T]) -> T | None:
    """Run one optional section; an ``AnalysisError`` becomes a note instead of failing the report."""
    try:
        return compute()
    except AnalysisError as exc:
        notes.append(f"{name} skipped: {exc.message}")
        return None


def _bracket_size_notes(frame: pd.DataFrame) -> list[str]:
    """A table that mixes bracket sizes (a final in round 1 of a 2-system study, in round 2 of a 4-system
    one) still analyses, but a later stage's per-variant rate then counts the advances from the stage before
    across every bracket: say so."""
    if "round" not in frame.columns:
        return []
    final_rounds = sorted({int(r) for r in pd.to_numeric(frame.loc[frame["stage"] == "final", "round"]).dropna()})
    if len(final_rounds) < 2:
        return []
    sizes = ", ".join(str(2**r) for r in final_rounds)
    return [
        f"the table mixes bracket sizes ({sizes} systems): each stage is pooled over brackets, and a later "
        "stage's per-variant rate is out of the variant's advances from the stage before over all brackets"
    ]


def analyze(
    table: pd.DataFrame, *, config: AnalysisConfig | None = None, exclusion: ExclusionSummary | None = None
) -> AnalysisReport:
    """Compute the whole report for a comparison table (see ``docs/comparison-table.md``).

    ``exclusion`` states the rule already applied to ``table`` (``analysis.stats.exclusion.apply_exclusion``),
    so that the report says what was left out; the table is analysed as given.

    Raises ``AnalysisError`` for a table that breaks the contract; a section the data cannot support
    (e.g. the regression without mixed-condition matches) is left ``None`` and explained in ``notes``.
    """
    config = config or AnalysisConfig()
    t = prepare_table(table)
    notes: list[str] = []
    if t.n_annotators < 2:
        notes.append("only one annotator: clustered intervals and p-values are undefined (reported as missing)")
    if not t.decided.any():
        notes.append("no decided matches: every win rate is undefined")
    if t.tie.any():
        notes.append(
            f"{int(t.tie.sum())} ties (both equally good) are left out of the decided win rates, the regression and "
            "Bradley-Terry, like neither; a variant's rate over all its matches counts a tie as a match not won"
        )
    notes.extend(_bracket_size_notes(t.frame))
    estimand = estimand_of(t.stage, has_stage="stage" in table.columns)
    if estimand.design == MIXED_DESIGN:
        notes.append(
            "the table mixes bracket and adaptive comparisons: each stage's rates describe its own design's rows"
        )
    if "stage" not in table.columns:
        notes.append("no tournament fields (stage, bracket_pair): every comparison is analysed as one stage, 'final'")
    if not has_conditions(t):
        notes.append(
            "no persona/generic conditions: win rates are per system ('system'), and the variant, condition, "
            "personalised-vs-generic statistics and the logistic regression do not apply"
        )
    unplaced = int((~placement_recorded(t)).sum())
    if unplaced:
        notes.append(
            f"left/right placement not recorded for {unplaced} of {t.n_rows} comparisons (legacy import or outside judgments): position "
            + ("bias is unavailable" if unplaced == t.n_rows else "bias uses only the rows where it was recorded")
        )
    resampler = ClusterResampler.draw(t.n_annotators, n_resamples=config.n_resamples, seed=config.seed)
    persona, generic = config.persona_condition, config.generic_condition
    small = use_small_sample(t.n_annotators, inference=config.inference, below=config.small_sample_below)
    few = few_annotators_warning(t.n_annotators, below=config.small_sample_below, small_sample=small)

    rates = win_rates(
        t,
        resampler=resampler,
        confidence_level=config.confidence_level,
        persona=persona,
        generic=generic,
        method=CR2_T if small else BOOTSTRAP,
        multiplicity=config.multiplicity,
    )
    regression = _section(
        "logistic regression",
        notes,
        lambda: fit_personalization_logit(
            t,
            reference_levels=config.reference_levels,
            predictors=config.regression_predictors,
            confidence_level=config.confidence_level,
            persona=persona,
            generic=generic,
            small_sample=small,
        ),
    )
    metrics = metric_names(t.frame)
    # Family, direction and comparability from the metric registry, on every path (file, database, notebook).
    info = describe_metrics(metrics) if config.use_metric_registry else {}
    agreement = (
        _section(
            "metric agreement",
            notes,
            lambda: metric_agreement(
                t,
                metrics=metrics,
                info=info,
                families=config.metric_families,
                thresholds=config.metric_thresholds,
                higher_is_better=config.higher_is_better,
                default_threshold=config.default_metric_threshold,
                threshold_sd_fraction=config.threshold_sd_fraction,
                resampler=resampler,
                confidence_level=config.confidence_level,
                level=config.agreement_level,
            ),
        )
        if metrics
        else None
    )
    sweeps: list[ThresholdAlpha] = []
    if agreement is not None:
        notes.extend(agreement.notes)
        notes.extend(f"metric agreement: {e.metric} left out: {e.reason}" for e in agreement.excluded)
        if config.threshold_sweep_points > 0:
            for m in agreement.metrics:
                if m.threshold_rule == "vote":
                    continue  # a judge's vote has no threshold to choose
                sweeps.extend(
                    alpha_threshold_sweep(
                        t,
                        m.metric,
                        default_sweep_thresholds(t, m.metric, config.threshold_sweep_points, sd=m.pooled_sd),
                        higher_is_better=m.higher_is_better,
                        sd=m.pooled_sd,
                        level=config.agreement_level,
                    )
                )
    bt = _section(
        "Bradley-Terry",
        notes,
        lambda: bradley_terry(
            t,
            resampler=resampler,
            confidence_level=config.confidence_level,
            pseudo_wins=config.bradley_terry_pseudo_wins,
        ),
    )
    if regression is not None:
        notes.extend(f"logistic regression: {n}" for n in regression.notes)

    frame = t.frame
    query_key = [c for c in ("study", "annotator", "query_id") if c in frame.columns]
    studies = tuple(sorted({str(s) for s in frame["study"].dropna().unique()})) if "study" in frame.columns else ()
    provenance = Provenance(
        n_rows=t.n_rows,
        n_decided=int(t.decided.sum()),
        n_neither=int(t.neither.sum()),
        n_tie=int(t.tie.sum()),
        n_annotators=t.n_annotators,
        n_queries=int(frame[query_key].drop_duplicates().shape[0]) if "query_id" in query_key else 0,
        studies=studies,
        columns=tuple(map(str, frame.columns)),
        metrics=metrics,
        table_sha256=table_checksum(table),
        code_version=code_version(),
        seed=config.seed,
        n_resamples=config.n_resamples,
        created_at=now_iso(),
    )
    return AnalysisReport(
        provenance=provenance,
        config=config,
        stages=stage_summaries(t),
        win_rates=rates,
        regression=regression,
        agreement=agreement,
        threshold_sweeps=tuple(sweeps),
        bradley_terry=bt,
        annotators=annotator_breakdown(t, persona=persona, generic=generic),
        page_times=page_times(t),
        notes=tuple(notes),
        warnings=(few,) if few else (),
        exclusion=exclusion,
        estimand=estimand,
        regression_family=(
            p_value_family(
                name="logistic regression",
                description="every coefficient of the logit, the intercept included",
                labels=[c.term for c in regression.coefficients],
                p_values=[c.p_value for c in regression.coefficients],
                method=config.multiplicity,
            )
            if regression is not None
            else None
        ),
    )


__all__ = ["AnalysisReport", "analyze"]
