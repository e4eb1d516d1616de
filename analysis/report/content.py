"""What an analysis report shows, computed in one step: the JSON document, the CSV tables, every figure's data
and every derived sentence. The renderers (``html``, ``plots``, ``json_report``, the CSV writer in ``bundle``)
read a ``ReportContent`` and compute nothing of their own."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from analysis.stats.agreement import AgreementResult, ThresholdAlpha
from analysis.stats.analyze import AnalysisReport
from analysis.stats.annotators import AnnotatorSummary, PageTime
from analysis.stats.bradley_terry import BradleyTerryResult, SystemStrength
from analysis.stats.estimand import BRADLEY_TERRY, Estimand
from analysis.stats.exclusion import ExclusionSummary
from analysis.stats.multiplicity import METHOD_NAMES, PValueFamily
from analysis.stats.regression import LogisticRegressionResult
from analysis.stats.small_sample import CR2_T
from analysis.stats.systems import RISK_BANDS, SystemTables
from analysis.stats.win_rates import Proportion, StageSummary, WinRate

FORMAT = "satisfy.analysis-report/1"
SMALL_CELL = 10  # matches in a win-rate row under which the report flags it as too few to read much into

# -- Figures: the data each plot draws, named by ``key`` ------------------------------------------------------


@dataclass(frozen=True)
class IntervalFigure:
    """Point estimates with horizontal intervals, one ``(label, estimate, low, high)`` row per label."""

    key: str
    caption: str
    rows: tuple[tuple[str, float, float, float], ...]
    title: str
    reference: float | None = 0.5
    xlabel: str = "share of decided matches"
    log: bool = False
    xlim: tuple[float, float] | None = (0.0, 1.0)


@dataclass(frozen=True)
class AlphaBar:
    metric: str
    family: str
    alpha: float


@dataclass(frozen=True)
class AlphaFigure:
    """Alpha per metric, coloured by family."""

    key: str
    caption: str
    bars: tuple[AlphaBar, ...]
    level: str


@dataclass(frozen=True)
class SweepLine:
    """One metric's alpha against the threshold (in pooled SDs); ``chosen`` is the threshold it used."""

    metric: str
    points: tuple[tuple[float, float], ...]
    chosen: tuple[float, float] | None


@dataclass(frozen=True)
class SweepFigure:
    """One panel per family (families sorted), one line per metric."""

    key: str
    caption: str
    panels: tuple[tuple[str, tuple[SweepLine, ...]], ...]


@dataclass(frozen=True)
class StrengthFigure:
    key: str
    caption: str
    systems: tuple[SystemStrength, ...]
    separated: bool


Figure = IntervalFigure | AlphaFigure | SweepFigure | StrengthFigure

# -- Sections ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WinRateBlock:
    """One statistic's table (``unavailable``: position bias without recorded placement)."""

    statistic: str
    title: str
    unavailable: bool
    figure: IntervalFigure | None
    rows: tuple[WinRate, ...]
    cell_notes: tuple[str, ...]


@dataclass(frozen=True)
class WinRateContent:
    level: str
    method: str
    multiplicity: str
    adjusted_header: str
    warnings: tuple[str, ...]
    blocks: tuple[WinRateBlock, ...]
    neither: tuple[Proportion, ...]


@dataclass(frozen=True)
class RegressionContent:
    result: LogisticRegressionResult
    level: str
    multiplicity: str
    adjusted_header: str
    p_adjusted: tuple[float, ...]
    references: tuple[tuple[str, str], ...]
    figure: IntervalFigure


@dataclass(frozen=True)
class AgreementContent:
    result: AgreementResult
    level: str
    alpha_intervals: tuple[str, ...]
    """Per metric: its interval as text ("not computed", "undefined" or "[low, high]" formatted by the page)."""
    alpha_figure: AlphaFigure
    sweeps: tuple[ThresholdAlpha, ...]
    sweep_figure: SweepFigure | None


@dataclass(frozen=True)
class SystemsContent:
    tables: SystemTables
    all_zero_note: str | None
    metric_tables: tuple[tuple[str, tuple[str, ...]], ...]
    """(title, metrics) of each metric-means table, in page order."""
    bands: tuple[str, ...]
    risk_cells: tuple[tuple[tuple[int, float], ...], ...]
    """Per risk row, per band: (count, share)."""


@dataclass(frozen=True)
class StrengthRow:
    system: SystemStrength
    words: str
    interval: str
    unbounded: str


@dataclass(frozen=True)
class StrengthContent:
    result: BradleyTerryResult
    separation_note: str | None
    rows: tuple[StrengthRow, ...]
    figure: StrengthFigure


@dataclass(frozen=True)
class ReportContent:
    """Everything the report shows, in the order the page shows it."""

    title: str
    provenance: tuple[tuple[str, str], ...]
    estimand: Estimand
    """The design and the headline statistic for it: the page shows Bradley-Terry first where it is the headline."""
    notes: tuple[str, ...]
    exclusion: ExclusionSummary | None
    stages: tuple[StageSummary, ...]
    win_rates: WinRateContent
    regression: RegressionContent | None
    agreement: AgreementContent | None
    systems: SystemsContent | None
    strengths: StrengthContent | None
    page_times: tuple[PageTime, ...]
    page_time_figure: IntervalFigure | None
    annotators: tuple[AnnotatorSummary, ...]
    data: Mapping[str, Any]
    """The JSON document: ``AnalysisReport.to_dict()`` with a format marker (and the per-system tables)."""
    tables: Mapping[str, pd.DataFrame]
    """One frame per statistic, named as its CSV in ``tables/``."""

    figures: tuple[Figure, ...]
    """Every figure above, in page order."""


# -- Words ---------------------------------------------------------------------------------------------------


def _finite(x: float) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def multiplicity_words(families: tuple[PValueFamily, ...], family: str) -> str:
    """What the adjusted p-values beside the raw ones are: the method and the family."""
    if not families:
        return "No p-values were adjusted for multiple testing."
    method = families[0].method
    if method == "none":
        return "p-values are not adjusted for multiple testing (multiplicity: none); the adjusted column repeats them."
    return f"Adjusted p-values: {METHOD_NAMES[method]}, within one family per {family}."


def _adjusted_header(families: tuple[PValueFamily, ...]) -> str:
    return f"p ({families[0].method})" if families else "p adjusted"


def cell_note(r: WinRate) -> str:
    """Why a win-rate row says little: no decided match (only "neither"), one annotator, or few matches."""
    if r.wins + r.losses == 0:
        return f"no decided match: {r.neither} “neither” of {r.n}, so no rate"
    notes = []
    if r.n < SMALL_CELL:
        notes.append(f"few matches (n = {r.n})")
    if r.n_annotators == 1:
        notes.append("one annotator decided them all")
    return "; ".join(notes)


def _strength(value: float) -> str:
    if value == math.inf:
        return "+∞"
    if value == -math.inf:
        return "−∞"
    return "–" if not math.isfinite(value) else f"{value:.3f}"


def strength_words(s: SystemStrength) -> str:
    """A log-strength for readers: an infinite one says why it is infinite ("0.000 [−∞, −∞]" said nothing)."""
    if s.unbounded == "above":
        return "always won against the rest (+∞)"
    if s.unbounded == "below":
        return "never won against the rest (−∞)"
    if s.unbounded:
        return "not comparable (no linking match)"
    return _strength(s.log_strength)


def interval_words(s: SystemStrength) -> str:
    """The interval; both ends infinite on one side means most resamples had the system unbounded there."""
    if s.ci_low == s.ci_high and not math.isfinite(s.ci_low):
        side = "always won" if s.ci_low > 0 else "never won"
        return f"none: {side} against the rest in most resamples ({_strength(s.ci_low)})"
    return f"[{_strength(s.ci_low)}, {_strength(s.ci_high)}]"


def _unbounded_words(s: SystemStrength) -> str:
    what = {"above": "never lost to the rest (+∞)", "below": "never beat the rest (−∞)"}
    return f"{s.system} {what.get(s.unbounded or '', 'is not linked to the others by any match')}"


def _alpha_interval(result: object) -> str:
    """The bootstrap interval of alpha when the agreement results carry one (``ci_low``/``ci_high``)."""
    low, high = getattr(result, "ci_low", None), getattr(result, "ci_high", None)
    if not isinstance(low, int | float) or not isinstance(high, int | float):
        return "not computed"
    if not (math.isfinite(low) and math.isfinite(high)):
        return "undefined"
    return f"[{float(low):.3f}, {float(high):.3f}]"


# -- Sections ------------------------------------------------------------------------------------------------

WIN_RATE_TITLES = {
    "variant": "Variants (model × condition); the first stage is out of the variant's matches, "
    "every later stage out of its advances into it (wins, ties whose coin sent it on, byes); the adaptive stage "
    "out of all its comparisons, opponents chosen by the design (description only)",
    "model_share": "Share of decided matches won, per model (null 1/k)",
    "condition_share": "Share of decided matches won, per condition (null 1/k)",
    "head_to_head": "Cross-model head-to-head (first-named model's wins)",
    "personalized_vs_generic": "Personalised vs generic, per bracket pair and round",
    "position": "Position bias: the left side",
}
PLOTTED = {
    "variant": "Variant win rates",
    "personalized_vs_generic": "Personalised vs generic",
    "head_to_head": "Cross-model head-to-head",
    "position": "Position bias (left side)",
}


def _win_rates(report: AnalysisReport) -> WinRateContent:
    wr = report.win_rates
    level = f"{wr.confidence_level:.0%}"
    method = (
        "Small-sample inference (few annotators): CR2 cluster-robust standard errors by annotator, "
        f"{level} intervals and two-sided p-values from the t distribution with G − 1 degrees of freedom"
        if wr.method == CR2_T
        else f"Annotator-clustered bootstrap: {wr.n_resamples} resamples of annotators with replacement, seed "
        f"{wr.seed}; {level} percentile intervals and two-sided p-values"
    )
    blocks = []
    for statistic, title in WIN_RATE_TITLES.items():
        rows = tuple(wr.select(statistic))
        if not rows:
            continue
        unavailable = statistic == "position" and all(r.n == 0 for r in rows)
        figure = None
        if statistic in PLOTTED and not unavailable:
            figure = IntervalFigure(
                key=f"win_rates:{statistic}",
                caption=f"{title}: decided-match rate with {level} CI",
                rows=tuple((f"{r.group} ({r.stage})", r.decided_rate, r.ci_low, r.ci_high) for r in rows),
                title=PLOTTED[statistic],
            )
        blocks.append(WinRateBlock(statistic, title, unavailable, figure, rows, tuple(cell_note(r) for r in rows)))
    return WinRateContent(
        level=level,
        method=method,
        multiplicity=multiplicity_words(wr.families, "statistic (each table below: every group and stage)"),
        adjusted_header=_adjusted_header(wr.families),
        warnings=report.warnings,
        blocks=tuple(blocks),
        neither=tuple(wr.neither),
    )


def _regression(report: AnalysisReport) -> RegressionContent | None:
    reg = report.regression
    if reg is None:
        return None
    family = report.regression_family
    families = (family,) if family is not None else ()
    adjusted = family.p_adjusted if family is not None else tuple(float("nan") for _ in reg.coefficients)
    return RegressionContent(
        result=reg,
        level=f"{reg.confidence_level:.0%}",
        multiplicity=multiplicity_words(families, "model (every coefficient, the intercept included)"),
        adjusted_header=_adjusted_header(families),
        p_adjusted=tuple(adjusted),
        references=tuple((str(k), str(v)) for k, v in reg.reference_levels.items()),
        figure=IntervalFigure(
            key="regression",
            caption="Odds ratios with confidence intervals; 1 = no effect",
            rows=tuple((c.term, c.odds_ratio, c.ci_low, c.ci_high) for c in reg.coefficients),
            title=f"Odds ratios, {reg.confidence_level:.0%} CI (SEs clustered by annotator)",
            reference=1.0,
            xlabel="odds ratio (log scale)",
            log=True,
            xlim=None,
        ),
    )


def _sweep_figure(sweeps: tuple[ThresholdAlpha, ...], result: AgreementResult) -> SweepFigure:
    used = {m.metric: m for m in result.metrics}
    by_metric: dict[str, list[ThresholdAlpha]] = {}
    for s in sweeps:
        if s.metric in used and _finite(s.sd_multiple):
            by_metric.setdefault(s.metric, []).append(s)
    panels = []
    for family in sorted({used[m].family for m in by_metric}):
        lines = []
        for name in (m for m in by_metric if used[m].family == family):
            points = sorted(by_metric[name], key=lambda s: s.threshold)
            chosen = used[name]
            mark = None
            if _finite(chosen.pooled_sd) and chosen.pooled_sd > 0 and _finite(chosen.alpha):
                mark = (chosen.threshold / chosen.pooled_sd, chosen.alpha)
            lines.append(
                SweepLine(name, tuple((p.sd_multiple, p.alpha if _finite(p.alpha) else math.nan) for p in points), mark)
            )
        panels.append((family, tuple(lines)))
    return SweepFigure(
        key="agreement:sweep",
        caption="Alpha per metric from threshold 0 to one pooled SD; the dot is the threshold used",
        panels=tuple(panels),
    )


def _agreement(report: AnalysisReport) -> AgreementContent | None:
    ag = report.agreement
    if ag is None:
        return None
    return AgreementContent(
        result=ag,
        level=f"{ag.confidence_level:.0%}",
        alpha_intervals=tuple(_alpha_interval(m) for m in ag.metrics),
        alpha_figure=AlphaFigure(
            key="agreement:alpha",
            caption="Alpha per metric, coloured by family",
            bars=tuple(AlphaBar(m.metric, m.family, m.alpha) for m in ag.metrics),
            level=ag.level,
        ),
        sweeps=report.threshold_sweeps,
        sweep_figure=_sweep_figure(report.threshold_sweeps, ag) if report.threshold_sweeps else None,
    )


def _systems(systems: SystemTables | None) -> SystemsContent | None:
    if systems is None:
        return None
    note = None
    if systems.all_zero:
        note = (
            f"{', '.join(systems.all_zero)} is 0 for every summary: the texts these metrics compare with "
            "(the sources' abstracts) are probably missing. For a legacy import, run "
            "`manage.py enrich_legacy` and score the study again."
        )
    plain = tuple(m for m in systems.metrics if m not in systems.abstractiveness and m != "ar_risk")
    tables = tuple(
        (title, metrics)
        for title, metrics in (("All metrics", plain), ("Abstractiveness: RA, SA, AR", systems.abstractiveness))
        if metrics
    )
    bands = tuple(reversed(RISK_BANDS))
    cells = tuple(tuple((r.counts.get(b, 0), r.share(b)) for b in bands) for r in systems.risk)
    return SystemsContent(systems, note, tables, bands, cells)


def _strengths(report: AnalysisReport) -> StrengthContent | None:
    bt = report.bradley_terry
    if bt is None:
        return None
    note = None
    if bt.separated:
        note = "; ".join(_unbounded_words(s) for s in bt.systems if s.unbounded)
    return StrengthContent(
        result=bt,
        separation_note=note,
        rows=tuple(
            StrengthRow(s, strength_words(s), interval_words(s), s.describe_unbounded(bt.n_resamples))
            for s in bt.systems
        ),
        figure=StrengthFigure(
            key="bradley_terry", caption="Log-strengths with intervals", systems=bt.systems, separated=bt.separated
        ),
    )


def _page_time_figure(report: AnalysisReport) -> IntervalFigure | None:
    times = report.page_times
    if not (times and times[0].n):
        return None
    return IntervalFigure(
        key="page_times",
        caption="Median (dot) and IQR (bar) of seconds per page",
        rows=tuple((p.stage, p.median, p.q1, p.q3) for p in times if p.n),
        title="Seconds per page: median and interquartile range",
        reference=None,
        xlabel="seconds",
        xlim=None,
    )


def _provenance(report: AnalysisReport) -> tuple[tuple[str, str], ...]:
    p = report.provenance
    return (
        ("comparisons", f"{p.n_rows} ({p.n_decided} decided, {p.n_neither} neither)"),
        ("annotators", str(p.n_annotators)),
        ("queries", str(p.n_queries)),
        ("studies", ", ".join(p.studies) or "–"),
        ("metrics", str(len(p.metrics))),
        ("input table sha256", p.table_sha256),
        ("code version", p.code_version),
        ("random seed", str(p.seed)),
        ("bootstrap resamples", str(p.n_resamples)),
        ("created", p.created_at),
    )


def report_data(report: AnalysisReport, systems: SystemTables | None = None) -> dict[str, Any]:
    """The JSON document: every statistic with a format marker."""
    out = {"format": FORMAT, **report.to_dict()}
    if systems is not None:
        out["systems"] = systems.to_dict()
    return out


def report_tables(report: AnalysisReport, systems: SystemTables | None = None) -> dict[str, pd.DataFrame]:
    """One frame per statistic, named as its CSV in ``tables/``."""
    frames: dict[str, pd.DataFrame] = {
        "stages": pd.DataFrame([s.to_dict() for s in report.stages]),
        "win_rates": report.win_rates.to_frame(),
        "neither_rates": report.win_rates.neither_frame(),
        "annotators": pd.DataFrame([a.to_dict() for a in report.annotators]),
        "page_times": pd.DataFrame([p.to_dict() for p in report.page_times]),
    }
    if report.regression is not None:
        frames["regression"] = report.regression.to_frame()
        if report.regression_family is not None and "p_value" in frames["regression"].columns:
            # The adjusted p-value beside the raw one, in the coefficients' order (regression_family).
            at = list(frames["regression"].columns).index("p_value") + 1
            frames["regression"].insert(at, "p_adjusted", list(report.regression_family.p_adjusted))
    if report.agreement is not None:
        frames["agreement"] = report.agreement.to_frame()
        frames["agreement_families"] = pd.DataFrame([f.to_dict() for f in report.agreement.families])
        if report.agreement.excluded:
            frames["agreement_excluded"] = pd.DataFrame([e.to_dict() for e in report.agreement.excluded])
        if report.agreement.position_consistency:
            frames["judge_position_consistency"] = pd.DataFrame(
                [c.to_dict() for c in report.agreement.position_consistency]
            )
    if report.threshold_sweeps:
        frames["threshold_sweeps"] = pd.DataFrame([s.to_dict() for s in report.threshold_sweeps])
    if report.bradley_terry is not None:
        frames["bradley_terry"] = report.bradley_terry.to_frame()
    if systems is not None:
        frames["system_metrics"] = systems.metric_frame()
        if systems.risk:
            frames["system_risk_bands"] = systems.risk_frame()
    return frames


def report_content(
    report: AnalysisReport, *, title: str = "Human evaluation analysis", systems: SystemTables | None = None
) -> ReportContent:
    """Compute everything the report shows; ``systems`` adds the per-system metric, abstractiveness and
    risk-band tables (``analysis.stats.systems.system_tables``)."""
    wr, regression, agreement = _win_rates(report), _regression(report), _agreement(report)
    strengths, page_time_figure = _strengths(report), _page_time_figure(report)
    strengths_first = report.estimand.headline == BRADLEY_TERRY
    figures: list[Figure | None] = [strengths.figure if strengths is not None and strengths_first else None]
    figures += [b.figure for b in wr.blocks]
    if regression is not None:
        figures.append(regression.figure)
    if agreement is not None:
        figures += [agreement.alpha_figure, agreement.sweep_figure]
    if strengths is not None and not strengths_first:
        figures.append(strengths.figure)
    figures.append(page_time_figure)
    return ReportContent(
        title=title,
        provenance=_provenance(report),
        estimand=report.estimand,
        notes=report.notes,
        exclusion=report.exclusion,
        stages=report.stages,
        win_rates=wr,
        regression=regression,
        agreement=agreement,
        systems=_systems(systems),
        strengths=strengths,
        page_times=report.page_times,
        page_time_figure=page_time_figure,
        annotators=report.annotators,
        data=report_data(report, systems),
        tables=report_tables(report, systems),
        figures=tuple(f for f in figures if f is not None),
    )
