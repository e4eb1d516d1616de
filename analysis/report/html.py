"""A standalone HTML report: inline CSS and SVG, no scripts, no external assets; all text escaped. It renders a
``ReportContent`` (``analysis.report.content``) with its figures already drawn, and computes nothing."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

from analysis.report.content import (
    SMALL_CELL,
    AgreementContent,
    Figure,
    RegressionContent,
    ReportContent,
    StrengthContent,
    SystemsContent,
    WinRateContent,
)
from analysis.stats.annotators import AnnotatorSummary, PageTime
from analysis.stats.estimand import BRADLEY_TERRY
from analysis.stats.exclusion import ExclusionSummary
from analysis.stats.win_rates import StageSummary

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


def _figure(figure: Figure, svgs: Mapping[str, str]) -> str:
    return f"<figure>{svgs[figure.key]}<figcaption>{escape(figure.caption)}</figcaption></figure>"


def _exclusion_section(ex: ExclusionSummary | None) -> str:
    """The exclusion rule and what it left out, per reason, zero counts included."""
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


def _stage_section(stages: Sequence[StageSummary]) -> str:
    """The stages the table holds (round1 .. final, from the data), so a reader sees the bracket's shape."""
    if not stages:
        return ""
    names = ", ".join(s.stage for s in stages)
    return "\n".join(
        [
            "<h2>Stages</h2>",
            f"<p>{len(stages)} stage{'s' if len(stages) != 1 else ''} in this table: "
            f"{escape(names)}. A bracket of 2<sup>k</sup> systems plays round1 to round(k−1) and a final; the "
            "adaptive design's comparisons are one stage, adaptive.</p>",
            _table(
                ["stage", "matches", "decided", "neither", "annotators"],
                [
                    [escape(s.stage), str(s.matches), str(s.decided), str(s.neither), str(s.n_annotators)]
                    for s in stages
                ],
            ),
        ]
    )


def _win_rate_section(wr: WinRateContent, svgs: Mapping[str, str]) -> str:
    level = wr.level
    parts = [
        "<h2>Win rates</h2>",
        *(f"<p class='warning' role='alert'>Warning: {escape(w)}</p>" for w in wr.warnings),
        f"<p>{wr.method} against the null on decided matches only "
        "(“neither” excluded). <em>rate</em> is wins / n; <em>decided</em> is wins / (wins + losses).</p>",
        f"<p>{escape(wr.multiplicity)}</p>",
    ]
    for block in wr.blocks:
        parts.append(f"<h3>{escape(block.title)}</h3>")
        if block.unavailable:
            parts.append(
                "<p class='note'>Unavailable: the left/right placement the annotators saw was not recorded for "
                "these comparisons (legacy import), so position bias cannot be measured.</p>"
            )
            continue
        if block.figure is not None:
            parts.append(_figure(block.figure, svgs))
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
                    wr.adjusted_header,
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
                        note,
                    ]
                    for r, note in zip(block.rows, block.cell_notes, strict=True)
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


def _regression_section(content: RegressionContent | None, svgs: Mapping[str, str]) -> str:
    if content is None:
        return "<h2>Logistic regression</h2><p>Not computed (see notes).</p>"
    reg, level = content.result, content.level
    refs = ", ".join(f"{escape(k)} = {escape(v)}" for k, v in content.references)
    return "\n".join(
        [
            "<h2>Logistic regression: personalised side wins</h2>",
            f"<p><code>{escape(reg.formula)}</code><br>N = {reg.n_obs} decided mixed-condition comparisons "
            f"({reg.n_events} personalised wins) from {reg.n_clusters} annotators; cluster-robust standard errors "
            f"grouped by annotator ({escape(reg.cov_type)}); reference levels: {refs}. "
            f"{escape(content.multiplicity)}</p>",
            _figure(content.figure, svgs),
            _table(
                ["term", "odds ratio", f"{level} CI", "log-odds", "SE", "z", "p", content.adjusted_header],
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
                    for c, p_adjusted in zip(reg.coefficients, content.p_adjusted, strict=True)
                ],
            ),
        ]
    )


def _systems_section(content: SystemsContent | None) -> str:
    """Seed 000's per-system tables: mean of every metric, mean RA/SA/AR, and the AR risk bands."""
    if content is None:
        return ""
    systems = content.tables
    parts = [
        "<h2>Systems: metric means</h2>",
        "<p>Each system's mean score over its distinct summaries (a summary shown in round 1 and in the final "
        "counts once).</p>",
    ]
    if content.all_zero_note is not None:
        parts.append("<p class='note'>" + escape(content.all_zero_note) + "</p>")
    for title, metrics in content.metric_tables:
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
        parts.append(
            _table(
                ["system", "scored", *content.bands],
                [
                    [escape(r.system), str(r.n_scored)] + [f"{count} ({_num(share, 2)})" for count, share in cells]
                    for r, cells in zip(systems.risk, content.risk_cells, strict=True)
                ],
            )
        )
    return "\n".join(parts)


def _agreement_section(content: AgreementContent | None, svgs: Mapping[str, str]) -> str:
    if content is None:
        return "<h2>Metric-human agreement</h2><p>No metric columns in the table.</p>"
    ag, level = content.result, content.level
    parts = [
        f"<h2>Metric-human agreement (Krippendorff's alpha, {escape(ag.level)})</h2>",
        "<p>Each metric votes for the side it scores better (direction from the metric registry), or “neither” "
        "when the scores differ by no more than its threshold: by default 0.2 pooled standard deviations of the "
        "metric over the candidates; a pairwise judge's own vote uses 0. Each judge (model, server, prompt "
        "version) is its own family. "
        f"Intervals: {level}, resampling annotators. Human choices: left {ag.human_left:.1%}, right "
        f"{ag.human_right:.1%}, neither {ag.human_neither:.1%} of {ag.n_comparisons} comparisons.</p>",
        _figure(content.alpha_figure, svgs),
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
                    interval,
                    f"{_num(m.threshold, 4)} ({escape(m.threshold_rule)})",
                    "higher" if m.higher_is_better else "lower",
                    str(m.n_units),
                    _num(m.raw_agreement),
                    f"{_num(m.metric_left, 2)} / {_num(m.metric_right, 2)} / {_num(m.metric_neither, 2)}",
                ]
                for m, interval in zip(ag.metrics, content.alpha_intervals, strict=True)
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
    if content.sweep_figure is not None:
        parts.append("<h3>Alpha across similarity thresholds</h3>")
        parts.append(_figure(content.sweep_figure, svgs))
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
                    for s in content.sweeps
                ],
            )
        )
    return "\n".join(parts)


def _strength_section(content: StrengthContent | None, svgs: Mapping[str, str]) -> list[str]:
    if content is None:
        return []
    bt = content.result
    parts = [
        "<h2>Bradley-Terry strengths of systems</h2>",
        f"<p>MM fit on {bt.n_comparisons} decided matches; {bt.confidence_level:.0%} intervals from the same "
        f"annotator-clustered resamples ({bt.n_valid_resamples} of {bt.n_resamples} had a finite fit).</p>",
        _figure(content.figure, svgs),
        _table(
            ["system", "log strength", "CI", "wins", "losses", "unbounded (infinite strength)"],
            [
                [
                    escape(r.system.system),
                    r.words,
                    r.interval,
                    str(r.system.wins),
                    str(r.system.losses),
                    escape(r.unbounded),
                ]
                for r in content.rows
            ],
        ),
    ]
    if content.separation_note is not None:
        parts.insert(
            2,
            "<p class='note'>The matches separate the systems: "
            + escape(content.separation_note)
            + ". Their strengths are infinite (no finite maximum-likelihood estimate); the others are centred "
            "at mean 0 among themselves. A small <code>bradley_terry_pseudo_wins</code> prior gives finite "
            "values instead.</p>",
        )
    return parts


def _page_time_section(times: Sequence[PageTime], figure: Figure | None, svgs: Mapping[str, str]) -> list[str]:
    parts = [
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
    if figure is not None:
        parts.append(_figure(figure, svgs))
    return parts


def _annotator_section(annotators: Sequence[AnnotatorSummary]) -> list[str]:
    return [
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
                for a in annotators
            ],
        ),
    ]


def render_page(content: ReportContent, svgs: Mapping[str, str]) -> str:
    """The whole report as one HTML document; ``svgs`` holds each of ``content.figures`` drawn, by key."""
    notes = "".join(f"<p class='note'>{escape(n)}</p>" for n in content.notes)
    # The design's headline first: Bradley-Terry strengths before the win rates for an adaptive design.
    strengths_first = content.estimand.headline == BRADLEY_TERRY
    strengths = _strength_section(content.strengths, svgs)
    extra = [
        *([] if strengths_first else strengths),
        *_page_time_section(content.page_times, content.page_time_figure, svgs),
        *_annotator_section(content.annotators),
    ]
    estimand = (
        f"<h2>What the headline estimates ({escape(content.estimand.design)} design)</h2>"
        f"<p id='estimand'>{escape(content.estimand.sentence)}</p>"
    )
    body = [
        f"<h1>{escape(content.title)}</h1>",
        "<h2>Data and settings</h2>",
        "<dl>"
        + "".join(f"<dt>{escape(k)}</dt><dd><code>{escape(v)}</code></dd>" for k, v in content.provenance)
        + "</dl>",
        _exclusion_section(content.exclusion),
        notes,
        estimand,
        _stage_section(content.stages),
        "\n".join(strengths) if strengths_first else "",
        _win_rate_section(content.win_rates, svgs),
        _regression_section(content.regression, svgs),
        _agreement_section(content.agreement, svgs),
        _systems_section(content.systems),
        "\n".join(extra),
    ]
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width,initial-scale=1'><title>{escape(content.title)}</title>"
        f"<style>{CSS}</style></head><body><main>\n" + "\n".join(body) + "\n</main></body></html>\n"
    )
