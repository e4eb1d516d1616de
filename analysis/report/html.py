"""A standalone HTML report: inline CSS and SVG, no scripts, no external assets; all text escaped."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from analysis.report.plots import (
    alpha_plot,
    forest_plot,
    interval_plot,
    strength_plot,
    threshold_sweep_plot,
    win_rate_plot,
)
from analysis.stats.analyze import AnalysisReport
from analysis.stats.bradley_terry import SystemStrength
from analysis.stats.multiplicity import METHOD_NAMES, PValueFamily
from analysis.stats.small_sample import CR2_T
from analysis.stats.systems import RISK_BANDS, SystemTables
from analysis.stats.win_rates import WinRate

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:70rem;color:#222;padding:0 1rem}
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2.2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}
h3{font-size:1.05rem}table{border-collapse:collapse;margin:.6rem 0 1rem;font-size:.85rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:right}th{background:#f4f4f4}
td.l,th.l{text-align:left}dl{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.15rem 1rem;font-size:.9rem}dd{margin:0;overflow-wrap:anywhere}
dt{font-weight:600}.note{background:#fff8e1;border-left:4px solid #edae49;padding:.4rem .8rem}
.warning{background:#fdecea;border-left:4px solid #d1495b;padding:.5rem .8rem;font-weight:600}
figure{margin:.5rem 0 1.2rem}svg{max-width:100%;height:auto}code{font-size:.85em}
.scroll{overflow-x:auto;max-width:100%}
@media (max-width:40rem){body{margin:1rem auto}dl{grid-template-columns:minmax(0,1fr)}dd{margin-bottom:.4rem}}
"""


def _num(value: object, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "–"
        return f"{value:.{digits}f}"
    return escape(str(value))


def _p(value: float) -> str:
    if not math.isfinite(value):
        return "–"
    return "&lt;0.001" if value < 0.001 else f"{value:.3f}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 1) -> str:
    head = "".join(f'<th class="{"l" if i < left else ""}">{escape(h)}</th>' for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{c}</td>' for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    # A wide table scrolls in its own box on a narrow screen (focusable, so it scrolls from the keyboard too).
    return f'<div class="scroll" tabindex="0"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>"


def _exclusion_section(report: AnalysisReport) -> str:
    """The exclusion rule and what it left out, per reason, zero counts included."""
    ex = report.exclusion
    if ex is None:
        return "<h2>Exclusions</h2><p id='exclusion-rule'>No exclusion rule applied (a table from a file).</p>"
    rows = [[escape(r), str(ex.participations[r]), str(ex.comparisons[r])] for r in ex.participations]
    rows.append(["total (each once)", str(ex.total_participations), str(ex.total_comparisons)])
    return "\n".join(
        [
            "<h2>Exclusions</h2>",
            f"<p id='exclusion-rule'>Exclusion rule: <code>{escape(ex.rule)}</code>. Every statistic, table and "
            f"plot below uses the {ex.kept_comparisons} comparisons it kept; attention checks are never data.</p>",
            _table(["reason", "participations", "comparisons"], rows),
        ]
    )


def _stage_section(report: AnalysisReport) -> str:
    """The stages the table holds (round1 .. final, from the data), so a reader sees the bracket's shape."""
    if not report.stages:
        return ""
    names = ", ".join(s.stage for s in report.stages)
    return "\n".join(
        [
            "<h2>Stages</h2>",
            f"<p>{len(report.stages)} stage{'s' if len(report.stages) != 1 else ''} in this table: "
            f"{escape(names)}. A bracket of 2<sup>k</sup> systems plays round1 to round(k−1) and a final.</p>",
            _table(
                ["stage", "matches", "decided", "neither", "annotators"],
                [
                    [escape(s.stage), str(s.matches), str(s.decided), str(s.neither), str(s.n_annotators)]
                    for s in report.stages
                ],
            ),
        ]
    )


def _win_rate_section(report: AnalysisReport) -> str:
    wr = report.win_rates
    level = f"{wr.confidence_level:.0%}"
    method = (
        "Small-sample inference (few annotators): CR2 cluster-robust standard errors by annotator, "
        f"{level} intervals and two-sided p-values from the t distribution with G − 1 degrees of freedom"
        if wr.method == CR2_T
        else f"Annotator-clustered bootstrap: {wr.n_resamples} resamples of annotators with replacement, seed "
        f"{wr.seed}; {level} percentile intervals and two-sided p-values"
    )
    parts = [
        "<h2>Win rates</h2>",
        *(f"<p class='warning' role='alert'>Warning: {escape(w)}</p>" for w in report.warnings),
        f"<p>{method} against the null on decided matches only "
        "(“neither” excluded). <em>rate</em> is wins / n; <em>decided</em> is wins / (wins + losses).</p>",
        f"<p>{_multiplicity_words(wr.families, 'statistic (each table below: every group and stage)')}</p>",
    ]
    adjusted = _adjusted_header(wr.families)
    titles = {
        "variant": "Variants (model × condition); the first stage is out of the variant's matches, "
        "every later stage out of its advances into it (wins, ties whose coin sent it on, byes)",
        "model_share": "Share of decided matches won, per model (null 1/k)",
        "condition_share": "Share of decided matches won, per condition (null 1/k)",
        "head_to_head": "Cross-model head-to-head (first-named model's wins)",
        "personalized_vs_generic": "Personalised vs generic, per bracket pair and round",
        "position": "Position bias: the left side",
    }
    for statistic, title in titles.items():
        rows = wr.select(statistic)
        if not rows:
            continue
        parts.append(f"<h3>{escape(title)}</h3>")
        if statistic == "position" and all(r.n == 0 for r in rows):
            parts.append(
                "<p class='note'>Unavailable: the left/right placement the annotators saw was not recorded for "
                "these comparisons (legacy import), so position bias cannot be measured.</p>"
            )
            continue
        if statistic in ("variant", "personalized_vs_generic", "head_to_head", "position"):
            short = {
                "variant": "Variant win rates",
                "personalized_vs_generic": "Personalised vs generic",
                "head_to_head": "Cross-model head-to-head",
                "position": "Position bias (left side)",
            }[statistic]
            parts.append(_figure(win_rate_plot(rows, title=short), f"{title}: decided-match rate with {level} CI"))
        parts.append(
            _table(
                [
                    "group",
                    "stage",
                    "wins",
                    "losses",
                    "neither",
                    "n",
                    "rate",
                    f"rate {level} CI",
                    "decided",
                    f"{level} CI",
                    "p",
                    adjusted,
                    "annotators deciding",
                    "note",
                ],
                [
                    [
                        escape(r.group),
                        escape(r.stage),
                        str(r.wins),
                        str(r.losses),
                        str(r.neither),
                        str(r.n),
                        _num(r.rate),
                        f"[{_num(r.rate_ci_low)}, {_num(r.rate_ci_high)}]",
                        _num(r.decided_rate),
                        f"[{_num(r.ci_low)}, {_num(r.ci_high)}]",
                        _p(r.p_value),
                        _p(r.p_adjusted),
                        str(r.n_annotators),
                        _cell_note(r),
                    ]
                    for r in rows
                ],
                left=2,
            )
        )
        parts.append(
            "<p class='note'>“Annotators deciding” counts the annotators with a decided match (a win or a loss, "
            f"not “neither”) in the row. A row with none has no rate; a row of fewer than {SMALL_CELL} matches, "
            "or decided by one annotator, is flagged: its interval says little.</p>"
        )
    parts.append("<h3>“Neither” rates</h3>")
    parts.append(
        _table(
            ["group", "stage", "neither", "n", "rate", f"{level} CI"],
            [
                [
                    escape(p.group),
                    escape(p.stage),
                    str(p.count),
                    str(p.n),
                    _num(p.estimate),
                    f"[{_num(p.ci_low)}, {_num(p.ci_high)}]",
                ]
                for p in wr.neither
            ],
            left=2,
        )
    )
    return "\n".join(parts)


def _multiplicity_words(families: Sequence[PValueFamily], family: str) -> str:
    """What the adjusted p-values beside the raw ones are: the method and the family."""
    if not families:
        return "No p-values were adjusted for multiple testing."
    method = families[0].method
    if method == "none":
        return "p-values are not adjusted for multiple testing (multiplicity: none); the adjusted column repeats them."
    return f"Adjusted p-values: {escape(METHOD_NAMES[method])}, within one family per {escape(family)}."


def _adjusted_header(families: Sequence[PValueFamily]) -> str:
    return f"p ({families[0].method})" if families else "p adjusted"


def _regression_section(report: AnalysisReport) -> str:
    reg = report.regression
    if reg is None:
        return "<h2>Logistic regression</h2><p>Not computed (see notes).</p>"
    level = f"{reg.confidence_level:.0%}"
    family = report.regression_family
    families = (family,) if family is not None else ()
    adjusted = family.p_adjusted if family is not None else tuple(float("nan") for _ in reg.coefficients)
    refs = ", ".join(f"{escape(k)} = {escape(v)}" for k, v in reg.reference_levels.items())
    return "\n".join(
        [
            "<h2>Logistic regression: personalised side wins</h2>",
            f"<p><code>{escape(reg.formula)}</code><br>N = {reg.n_obs} decided mixed-condition comparisons "
            f"({reg.n_events} personalised wins) from {reg.n_clusters} annotators; cluster-robust standard errors "
            f"grouped by annotator ({escape(reg.cov_type)}); reference levels: {refs}. "
            f"{_multiplicity_words(families, 'model (every coefficient, the intercept included)')}</p>",
            _figure(forest_plot(reg), "Odds ratios with confidence intervals; 1 = no effect"),
            _table(
                ["term", "odds ratio", f"{level} CI", "log-odds", "SE", "z", "p", _adjusted_header(families)],
                [
                    [
                        escape(c.term),
                        _num(c.odds_ratio, 2),
                        f"[{_num(c.ci_low, 2)}, {_num(c.ci_high, 2)}]",
                        _num(c.estimate),
                        _num(c.std_error),
                        _num(c.z, 2),
                        _p(c.p_value),
                        _p(p_adjusted),
                    ]
                    for c, p_adjusted in zip(reg.coefficients, adjusted, strict=True)
                ],
            ),
        ]
    )


def _alpha_ci(result: object) -> str:
    """The bootstrap interval of alpha when the agreement results carry one (``ci_low``/``ci_high``)."""
    low, high = getattr(result, "ci_low", None), getattr(result, "ci_high", None)
    if not isinstance(low, int | float) or not isinstance(high, int | float):
        return "not computed"
    if not (math.isfinite(low) and math.isfinite(high)):
        return "undefined"
    return f"[{_num(float(low))}, {_num(float(high))}]"


def _systems_section(systems: SystemTables | None) -> str:
    """Seed 000's per-system tables: mean of every metric, mean RA/SA/AR, and the AR risk bands."""
    if systems is None:
        return ""
    parts = [
        "<h2>Systems: metric means</h2>",
        "<p>Each system's mean score over its distinct summaries (a summary shown in round 1 and in the final "
        "counts once).</p>",
    ]
    if systems.all_zero:
        parts.append(
            "<p class='note'>"
            + escape(
                f"{', '.join(systems.all_zero)} is 0 for every summary: the texts these metrics compare with "
                "(the sources' abstracts) are probably missing. For a legacy import, run "
                "`manage.py enrich_legacy` and score the study again."
            )
            + "</p>"
        )
    plain = [m for m in systems.metrics if m not in systems.abstractiveness and m != "ar_risk"]
    for title, metrics in (("All metrics", plain), ("Abstractiveness: RA, SA, AR", list(systems.abstractiveness))):
        if not metrics:
            continue
        parts.append(f"<h3>{escape(title)}</h3>")
        parts.append(
            _table(
                ["system", "summaries", *metrics],
                [
                    [escape(r.system), str(r.n_candidates), *(_num(r.means.get(m)) for m in metrics)]
                    for r in systems.rows
                ],
            )
        )
    if systems.risk:
        parts.append("<h3>Hallucination risk bands (bigram AR)</h3>")
        parts.append(
            "<p>AR &gt; 2.0 high, 1.2 &lt; AR ≤ 2.0 moderate, 0.8 ≤ AR ≤ 1.2 balanced, AR &lt; 0.8 extractive; "
            "count (share) of each system's scored summaries.</p>"
        )
        bands = list(reversed(RISK_BANDS))
        parts.append(
            _table(
                ["system", "scored", *bands],
                [
                    [escape(r.system), str(r.n_scored)]
                    + [f"{r.counts.get(b, 0)} ({_num(r.share(b), 2)})" for b in bands]
                    for r in systems.risk
                ],
            )
        )
    return "\n".join(parts)


def _agreement_section(report: AnalysisReport) -> str:
    ag = report.agreement
    if ag is None:
        return "<h2>Metric-human agreement</h2><p>No metric columns in the table.</p>"
    level = f"{ag.confidence_level:.0%}"
    parts = [
        f"<h2>Metric-human agreement (Krippendorff's alpha, {escape(ag.level)})</h2>",
        "<p>Each metric votes for the side it scores better (direction from the metric registry), or “neither” "
        "when the scores differ by no more than its threshold: by default 0.2 pooled standard deviations of the "
        "metric over the candidates; a pairwise judge's own vote uses 0. Each judge (model, server, prompt "
        "version) is its own family. "
        f"Intervals: {level}, resampling annotators. Human choices: left {ag.human_left:.1%}, right "
        f"{ag.human_right:.1%}, neither {ag.human_neither:.1%} of {ag.n_comparisons} comparisons.</p>",
        _figure(alpha_plot(ag), "Alpha per metric, coloured by family"),
        _table(
            ["family", "metrics", "mean α", "min α", "max α"],
            [
                [escape(f.family), str(f.n_metrics), _num(f.mean_alpha), _num(f.min_alpha), _num(f.max_alpha)]
                for f in ag.families
            ],
        ),
        _table(
            [
                "family",
                "metric",
                "α",
                f"{level} CI",
                "threshold used",
                "better",
                "units",
                "raw agreement",
                "votes L/R/N",
            ],  # fmt: skip
            [
                [
                    escape(m.family),
                    escape(m.metric),
                    _num(m.alpha),
                    _alpha_ci(m),
                    f"{_num(m.threshold, 4)} ({escape(m.threshold_rule)})",
                    "higher" if m.higher_is_better else "lower",
                    str(m.n_units),
                    _num(m.raw_agreement),
                    f"{_num(m.metric_left, 2)} / {_num(m.metric_right, 2)} / {_num(m.metric_neither, 2)}",
                ]
                for m in ag.metrics
            ],
            left=2,
        ),
    ]
    if ag.position_consistency:
        parts.append("<h3>Pairwise judges: position consistency</h3>")
        parts.append(
            _table(
                ["judge", "matches asked in both orders", "same side in both orders"],
                [[escape(c.judge), str(c.n_units), _num(c.rate)] for c in ag.position_consistency],
            )
        )
    if ag.excluded:
        parts.append(
            "<p class='note'>Left out of agreement: "
            + "; ".join(f"{escape(e.metric)} ({escape(e.reason)})" for e in ag.excluded)
            + ".</p>"
        )
    if report.threshold_sweeps:
        parts.append("<h3>Alpha across similarity thresholds</h3>")
        parts.append(
            _figure(
                threshold_sweep_plot(report.threshold_sweeps, ag),
                "Alpha per metric from threshold 0 to one pooled SD; the dot is the threshold used",
            )
        )
        parts.append(
            _table(
                ["metric", "threshold", "in pooled SDs", "α", "metric says neither"],
                [
                    [
                        escape(s.metric),
                        _num(s.threshold, 4),
                        _num(s.sd_multiple, 2),
                        _num(s.alpha),
                        _num(s.metric_neither),
                    ]
                    for s in report.threshold_sweeps
                ],
            )
        )
    return "\n".join(parts)


def _strength(value: float) -> str:
    if value == math.inf:
        return "+∞"
    if value == -math.inf:
        return "−∞"
    return _num(value)


SMALL_CELL = 10  # matches in a win-rate row under which the report flags it as too few to read much into


def _cell_note(r: WinRate) -> str:
    """Why a win-rate row says little: no decided match (only "neither"), one annotator, or few matches."""
    if r.wins + r.losses == 0:
        return f"no decided match: {r.neither} “neither” of {r.n}, so no rate"
    notes = []
    if r.n < SMALL_CELL:
        notes.append(f"few matches (n = {r.n})")
    if r.n_annotators == 1:
        notes.append("one annotator decided them all")
    return "; ".join(notes)


def _strength_words(s: SystemStrength) -> str:
    """A log-strength for readers: an infinite one says why it is infinite ("0.000 [−∞, −∞]" said nothing)."""
    if s.unbounded == "above":
        return "always won against the rest (+∞)"
    if s.unbounded == "below":
        return "never won against the rest (−∞)"
    if s.unbounded:
        return "not comparable (no linking match)"
    return _strength(s.log_strength)


def _interval_words(s: SystemStrength) -> str:
    """The interval; both ends infinite on one side means most resamples had the system unbounded there."""
    if s.ci_low == s.ci_high and not math.isfinite(s.ci_low):
        side = "always won" if s.ci_low > 0 else "never won"
        return f"none: {side} against the rest in most resamples ({_strength(s.ci_low)})"
    return f"[{_strength(s.ci_low)}, {_strength(s.ci_high)}]"


def _unbounded_words(s: SystemStrength) -> str:
    what = {"above": "never lost to the rest (+∞)", "below": "never beat the rest (−∞)"}
    return f"{s.system} {what.get(s.unbounded or '', 'is not linked to the others by any match')}"


def _extra_sections(report: AnalysisReport) -> str:
    parts = []
    bt = report.bradley_terry
    if bt is not None:
        parts += [
            "<h2>Bradley-Terry strengths of systems</h2>",
            f"<p>MM fit on {bt.n_comparisons} decided matches; {bt.confidence_level:.0%} intervals from the same "
            f"annotator-clustered resamples ({bt.n_valid_resamples} of {bt.n_resamples} had a finite fit).</p>",
            _figure(strength_plot(bt), "Log-strengths with intervals"),
            _table(
                ["system", "log strength", "CI", "wins", "losses", "unbounded (infinite strength)"],
                [
                    [
                        escape(s.system),
                        _strength_words(s),
                        _interval_words(s),
                        str(s.wins),
                        str(s.losses),
                        escape(s.describe_unbounded(bt.n_resamples)),
                    ]
                    for s in bt.systems
                ],
            ),
        ]
        if bt.separated:
            parts.insert(
                2,
                "<p class='note'>The matches separate the systems: "
                + escape("; ".join(_unbounded_words(s) for s in bt.systems if s.unbounded))
                + ". Their strengths are infinite (no finite maximum-likelihood estimate); the others are centred "
                "at mean 0 among themselves. A small <code>bradley_terry_pseudo_wins</code> prior gives finite "
                "values instead.</p>",
            )
    times = report.page_times
    parts += [
        "<h2>Time per page</h2>",
        _table(
            ["stage", "pages", "median s", "Q1", "Q3", "IQR", "mean s"],
            [
                [
                    escape(p.stage),
                    str(p.n),
                    _num(p.median, 1),
                    _num(p.q1, 1),
                    _num(p.q3, 1),
                    _num(p.iqr, 1),
                    _num(p.mean, 1),
                ]
                for p in times
            ],
        ),
    ]
    if times and times[0].n:
        parts.append(
            _figure(
                interval_plot(
                    [(p.stage, p.median, p.q1, p.q3) for p in times if p.n],
                    title="Seconds per page: median and interquartile range",
                    reference=None,
                    xlabel="seconds",
                    xlim=None,
                ),
                "Median (dot) and IQR (bar) of seconds per page",
            )
        )
    parts += [
        "<h2>Annotators</h2>",
        _table(
            [
                "annotator",
                "matches",
                "queries",
                "decided",
                "neither rate",
                "left-win rate",
                "pers. wins/decided",
                "pers. win rate",
                "median s",
            ],
            [
                [
                    escape(a.annotator),
                    str(a.n_matches),
                    str(a.n_queries),
                    str(a.n_decided),
                    _num(a.neither_rate),
                    _num(a.left_win_rate),
                    f"{a.personalized_wins}/{a.personalized_decided}",
                    _num(a.personalized_win_rate),
                    _num(a.median_seconds, 1),
                ]
                for a in report.annotators
            ],
        ),
    ]
    return "\n".join(parts)


def render_html(
    report: AnalysisReport, *, title: str = "Human evaluation analysis", systems: SystemTables | None = None
) -> str:
    """The whole report as one HTML document (``systems`` adds the per-system tables)."""
    p = report.provenance
    prov = [
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
    ]
    notes = "".join(f"<p class='note'>{escape(n)}</p>" for n in report.notes)
    body = [
        f"<h1>{escape(title)}</h1>",
        "<h2>Data and settings</h2>",
        "<dl>" + "".join(f"<dt>{escape(k)}</dt><dd><code>{escape(v)}</code></dd>" for k, v in prov) + "</dl>",
        _exclusion_section(report),
        notes,
        _stage_section(report),
        _win_rate_section(report),
        _regression_section(report),
        _agreement_section(report),
        _systems_section(systems),
    ]
    body.append(_extra_sections(report))
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width,initial-scale=1'><title>{escape(title)}</title>"
        f"<style>{CSS}</style></head><body><main>\n" + "\n".join(body) + "\n</main></body></html>\n"
    )
