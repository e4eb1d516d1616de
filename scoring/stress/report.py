"""Render a stress report: a standalone HTML page (inline SVG, no external assets), JSON and CSV.

`write_report` is the one path: `scoring.stress.content` computes everything the report shows, then the
renderers here draw the figures and write the page, the JSON and the CSVs from that content alone.
The grid mirrors the paper's table: one row per metric, a rho and an M cell per test, green for
pass, red for fail, grey for undefined (a constant metric or too few scored levels).
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from scoring.stress.content import (
    CSV_FIELDS,
    SCORE_FIELDS,
    LevelFigure,
    StressContent,
    level_figure_data,
    stress_content,
)
from scoring.stress.perturb import StressError
from scoring.stress.stats import Verdict
from scoring.stress.types import StressReport

__all__ = ["CSV_FIELDS", "level_figure", "render_html", "write_report"]

_COLOURS = {
    Verdict.PASS: "#b7e1b5",
    Verdict.FAIL: "#f4b6b6",
    Verdict.UNDEFINED: "#d6d6d6",
    Verdict.NOT_APPLICABLE: "#f3f3f3",
}
_PALETTE = (
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
)  # fmt: skip
_DASHES = ("", "6 3", "2 3", "8 3 2 3")


def _num(x: float | None, digits: int = 2) -> str:
    if x is None or not math.isfinite(x):
        return "undefined"
    return f"{x:.{digits}f}"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def write_report(report: StressReport, out_dir: Path) -> StressReport:
    """Write report.html, report.json, results.csv and scores.csv; return the report with their paths."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StressError(f"--out: {exc}") from exc
    files = {
        "html": str(out_dir / "report.html"),
        "json": str(out_dir / "report.json"),
        "results_csv": str(out_dir / "results.csv"),
        "scores_csv": str(out_dir / "scores.csv"),
    }
    report = replace(report, files=files)
    content = stress_content(report)
    svgs = [figure_svg(draw_levels(f)) for f in content.level_figures]
    Path(files["json"]).write_text(
        json.dumps(content.data, indent=2, ensure_ascii=False, allow_nan=False), encoding="utf-8"
    )
    for key, fields, rows in (
        ("results_csv", CSV_FIELDS, content.results_rows),
        ("scores_csv", SCORE_FIELDS, content.score_rows),
    ):
        with open(files[key], "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(fields))
            writer.writeheader()
            writer.writerows(rows)
    Path(files["html"]).write_text(render_page(content, svgs), encoding="utf-8")
    return report


def render_html(report: StressReport) -> str:
    """The report's page on its own (compute, draw, render)."""
    content = stress_content(report)
    return render_page(content, [figure_svg(draw_levels(f)) for f in content.level_figures])


def level_figure(report: StressReport, test: str) -> Any:
    """Mean score by perturbation level for one test (see `draw_levels`), computed and drawn."""
    return draw_levels(level_figure_data(report, test))


# -- Figures -------------------------------------------------------------------------------


PANEL_COLUMNS = 4


def draw_levels(figure: LevelFigure) -> Any:
    """Mean score by perturbation level for one test: small multiples, one panel per metric, each on its own
    y axis, so that a metric moving 200-fold beside others moving 5% flattens none of them. The dashed line
    is the unperturbed summary's mean. Returns a matplotlib ``Figure`` (object API, no pyplot state)."""
    # matplotlib is heavy: loaded when a report is drawn, not when the stress package is imported.
    import matplotlib.figure

    # Level and metric names drawn as written, not parsed as mathtext (analysis.report.plots.plain_text).
    with matplotlib.rc_context({"text.parse_math": False}):
        return _draw_levels(figure, matplotlib.figure.Figure)


def _draw_levels(figure: LevelFigure, Figure: Any) -> Any:  # noqa: N803
    res = figure.panels
    n = max(len(res), 1)
    cols = min(PANEL_COLUMNS, n)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(2.6 * cols + 0.4, 2.1 * rows + 0.6))
    axes = fig.subplots(rows, cols, squeeze=False)
    for k, ax in enumerate(axes.flat):
        if k >= len(res):
            ax.set_visible(False)
            continue
        r = res[k]
        xs = list(range(len(r.levels)))
        ys = list(r.means)
        ax.plot(xs, ys, marker="o", markersize=3, color=_PALETTE[k % len(_PALETTE)], linewidth=1.5)
        if math.isfinite(r.reference):
            ax.axhline(r.reference, color="#888888", linestyle="--", linewidth=0.8)
        finite = [y for y in ys if math.isfinite(y)]
        if finite and max(finite) - min(finite) < 1e-12:
            # A flat series gets a small band around it instead of matplotlib's +-5% of zero.
            centre = finite[0]
            half = max(abs(centre) * 0.05, 1e-3)
            ax.set_ylim(centre - half, centre + half)
        elif finite:
            lo, hi = min(finite), max(finite)
            pad = (hi - lo) * 0.08
            ax.set_ylim(lo - pad, hi + pad)
        ax.set_title(r.metric, fontsize=9)
        ax.set_xticks(xs)
        ax.set_xticklabels(r.levels, fontsize=7, rotation=30 if len(r.levels) > 4 else 0)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(figure.title, fontsize=10)
    fig.tight_layout()
    return fig


def figure_svg(fig: Any) -> str:
    """One figure as inline SVG (no XML header, a fixed hash salt so that ids do not change)."""
    # matplotlib's SVG backend is heavy: loaded when a report is drawn.
    import matplotlib.backends.backend_svg

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "satisfy-stress"}):
        matplotlib.backends.backend_svg.FigureCanvasSVG(fig).print_svg(buf)  # type: ignore[no-untyped-call]
    text = re.sub(r"^<\?xml[^>]*>\s*", "", buf.getvalue())
    return re.sub(r"<!DOCTYPE[^>]*>\s*", "", text)


def line_chart(
    series: Mapping[str, Sequence[float | None]],
    x_labels: Sequence[str],
    *,
    title: str,
    y_label: str,
    width: int = 560,
    height: int = 300,
) -> str:
    """An inline SVG line chart; None/NaN points break the line."""
    left, right, top, bottom = 56, 150, 28, 46
    pw, ph = width - left - right, height - top - bottom
    values = [v for s in series.values() for v in s if v is not None and math.isfinite(v)]
    if not values or not x_labels:
        return f'<svg width="{width}" height="40"><text x="4" y="24">{_e(title)}: no data</text></svg>'
    lo, hi = min(values), max(values)
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    pad = (hi - lo) * 0.05
    lo, hi = lo - pad, hi + pad
    n = len(x_labels)

    def x(i: int) -> float:
        return left + (pw * i / (n - 1) if n > 1 else pw / 2)

    def y(v: float) -> float:
        return top + ph * (1 - (v - lo) / (hi - lo))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="{_e(title)}">',
        f'<text x="{left}" y="16" font-weight="bold">{_e(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>',
    ]
    for k in range(5):
        tick = lo + (hi - lo) * k / 4
        parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{left - 4}" y="{y(tick) + 4:.1f}" text-anchor="end" font-size="10">{tick:.3g}</text>')
    for i, lab in enumerate(x_labels):
        parts.append(f'<text x="{x(i):.1f}" y="{top + ph + 14}" text-anchor="middle" font-size="10">{_e(lab)}</text>')
    parts.append(
        f'<text x="12" y="{top + ph / 2:.1f}" font-size="11" transform="rotate(-90 12 {top + ph / 2:.1f})" '
        f'text-anchor="middle">{_e(y_label)}</text>'
    )
    for k, (name, vals) in enumerate(series.items()):
        colour = _PALETTE[k % len(_PALETTE)]
        dash = _DASHES[(k // len(_PALETTE)) % len(_DASHES)]
        segment: list[str] = []
        segments: list[list[str]] = []
        for i, v in enumerate(vals):
            if v is None or not math.isfinite(v):
                if segment:
                    segments.append(segment)
                segment = []
                continue
            segment.append(f"{x(i):.1f},{y(v):.1f}")
            parts.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="2.5" fill="{colour}"/>')
        if segment:
            segments.append(segment)
        for seg in segments:
            if len(seg) > 1:
                parts.append(
                    f'<polyline fill="none" stroke="{colour}" stroke-width="1.6" stroke-dasharray="{dash}" '
                    f'points="{" ".join(seg)}"/>'
                )
        ly = top + 12 + 14 * k
        if ly < height - 4:
            parts.append(
                f'<line x1="{left + pw + 8}" x2="{left + pw + 26}" y1="{ly - 4}" y2="{ly - 4}" stroke="{colour}" '
                f'stroke-width="2" stroke-dasharray="{dash}"/>'
                f'<text x="{left + pw + 30}" y="{ly}" font-size="10">{_e(name)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


# -- HTML ----------------------------------------------------------------------------------


def _grid(content: StressContent) -> str:
    head1 = "".join(
        f'<th colspan="2" title="{_e(t.description)}">{_e(t.name)}<br><small>{_e(t.direction)}</small></th>'
        for t in content.grid_tests
    )
    head2 = "".join("<th>&rho;</th><th>M</th>" for _ in content.grid_tests)
    body = []
    for row in content.grid:
        cells = []
        for c in row.cells:
            if c is None:
                cells.append("<td></td><td></td>")
                continue
            rho_txt = "n/a" if c.rho is None else _num(c.rho)
            cells.append(
                f'<td style="background:{_COLOURS[c.rho_verdict]}" title="{_e(c.rho_verdict.value)}">{rho_txt}</td>'
                f'<td style="background:{_COLOURS[c.m_verdict]}" title="{_e(c.m_verdict.value)}">{_num(c.monotonicity)}</td>'
            )
        body.append(
            f"<tr><th>{_e(row.metric)}</th>{''.join(cells)}<td>{row.passed}/{len(content.grid_tests)}</td></tr>"
        )
    legend = " ".join(
        f'<span class="sw" style="background:{_COLOURS[v]}"></span>{label}'
        for v, label in (
            (Verdict.PASS, "pass"),
            (Verdict.FAIL, "fail"),
            (Verdict.UNDEFINED, "undefined (fails)"),
            (Verdict.NOT_APPLICABLE, "not applicable"),
        )
    )
    return (
        f'<table class="grid"><thead><tr><th rowspan="2">metric</th>{head1}<th rowspan="2">tests passed</th></tr>'
        f"<tr>{head2}</tr></thead><tbody>{''.join(body)}</tbody></table><p class=legend>{legend}</p>"
    )


def _meaning_preserving(content: StressContent) -> str:
    if not content.meaning_tests:
        return ""
    head = "".join(f"<th>{_e(t)}</th>" for t in content.meaning_tests)
    rows = []
    for metric, cells in content.meaning_rows:
        tds = []
        for cell in cells:
            if cell is None:
                tds.append("<td></td>")
                continue
            change, rel = cell
            shade = "#ffffff" if not math.isfinite(rel) else f"rgba(214,39,40,{min(1.0, rel * 4):.2f})"
            rel_txt = f" ({rel:.0%})" if math.isfinite(rel) else ""
            tds.append(f'<td style="background:{shade}">{_num(change, 4)}{rel_txt}</td>')
        rows.append(f"<tr><th>{_e(metric)}</th>{''.join(tds)}</tr>")
    return (
        "<h2>Meaning-preserving perturbations</h2><p>Mean absolute score change from the original "
        "(share of the original mean in brackets; darker is less stable).</p>"
        f'<table class="heat"><thead><tr><th>metric</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


def _rewrites(content: StressContent) -> str:
    if not content.any_rewrites:
        return ""
    rows = [
        f"<tr><th>{_e(r.test)}</th><td>{r.rewrites}</td><td>{r.failed}</td><td>{r.flagged}</td>"
        f"<td>{_num(r.mean_similarity)}</td><td>v{r.prompt_version}</td></tr>"
        for r in content.rewrites
    ]
    ex_html = "".join(
        f"<li><b>{_e(r.test)}</b> {_e(r.row_id)} ({_e(r.label)}): {_e(r.reasons)}</li>" for r in content.flagged
    )
    return (
        "<h2>LLM rewrites</h2><table><thead><tr><th>test</th><th>rewrites</th><th>failed</th><th>flagged</th>"
        f"<th>mean similarity</th><th>prompt</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        + (f"<p>Flagged rewrites (first {len(content.flagged)}):</p><ul>{ex_html}</ul>" if content.flagged else "")
    )


def _long_document(content: StressContent) -> str:
    ld = content.long_document
    if ld is None:
        return ""
    return (
        "<h2>Long documents</h2>"
        f"<p>{_e(ld.n_documents)} documents, {_e(ld.n_sentences)} summary sentences, top-K = {_e(ld.top_k)}, "
        f"sentence embedder <code>{_e(ld.embedder)}</code>.</p>"
        + (f'<p class="warning"><b>Warning:</b> {_e(ld.embedder_warning)}</p>' if ld.embedder_warning else "")
        + '<div class="plot">'
        + line_chart(ld.window_means, ld.window_labels, title="Retrieval window sweep", y_label="mean score")
        + '</div><div class="plot">'
        + line_chart(
            ld.bin_means,
            ld.bin_labels,
            title=f"Score per claim-similarity bin (w={ld.bin_window})",
            y_label="mean sentence score",
        )
        + f"</div><p>Sentences per bin: {_e(ld.bin_counts)}</p>"
    )


def _timings(content: StressContent) -> str:
    rows = "".join(
        f"<tr><td>{_e(t.stage)}</td><td>{_e(t.group)}</td><td>{_e(', '.join(t.metrics))}</td>"
        f"<td>{t.seconds:.3f}</td><td>{t.n_texts}</td></tr>"
        for t in content.timings
    )
    return (
        "<details><summary>Timings</summary><table><thead><tr><th>stage</th><th>family</th><th>metrics</th><th>seconds</th>"
        f"<th>texts scored</th></tr></thead><tbody>{rows}</tbody></table></details>"
    )


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#222;max-width:1400px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:center}
tbody th{text-align:left;font-weight:600}
.sw{display:inline-block;width:14px;height:14px;margin:0 4px 0 12px;vertical-align:middle;border:1px solid #aaa}
.plot{display:inline-block;margin:6px 12px 6px 0;vertical-align:top;max-width:100%}
.plot svg{max-width:100%;height:auto}
.legend{font-size:13px}
code{background:#f4f4f4;padding:1px 4px}
"""


def render_page(content: StressContent, svgs: Sequence[str]) -> str:
    """The page; ``svgs`` holds ``content.level_figures`` drawn, in order."""
    prov_rows = "".join(f"<tr><th>{_e(k)}</th><td><code>{_e(v)}</code></td></tr>" for k, v in content.provenance)
    plots = "".join(f'<div class="plot">{p}</div>' for p in svgs)
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>Metric stress tests</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<h1>Metric stress tests</h1><p>{content.n_rows} summaries, {content.n_metrics} metrics, "
        f"{content.n_tests} tests, seed {content.seed}. Pass: |&rho;| &ge; 0.4 in the expected direction "
        "(|&rho;| &le; 0.2 for stable tests) and M &ge; 0.5; a stable test over two levels is judged by M alone.</p>"
        "<p id=definitions><b>&rho;</b> (rho) is Spearman's rank correlation between the perturbation level (0, 1, "
        "2, ...) and the metric's mean score at that level: &minus;1 when every step lowers the score, +1 when "
        "every step raises it, near 0 when the score does not follow the level. <b>M</b> (monotonicity) is the "
        "share of steps from one level to the next that move the score the expected way (down, up, or, for a "
        "stable test, by under 5% of the original score): 1 when every step does.</p>"
        f"{_grid(content)}<h2>Mean score by perturbation level</h2>"
        "<p>One panel per metric, each on its own scale (a metric moving 200-fold beside others moving 5% would "
        "flatten them on a shared axis); the dashed line is the unperturbed summary's mean.</p>"
        f"{plots}"
        f"{_meaning_preserving(content)}{_rewrites(content)}{_long_document(content)}"
        f"<h2>Provenance</h2><table>{prov_rows}</table>{_timings(content)}</body></html>"
    )
