"""Render a stress report: a standalone HTML page (inline SVG, no external assets), JSON and CSV.

The grid mirrors the paper's table: one row per metric, a rho and an M cell per test, green for
pass, red for fail, grey for undefined (a constant metric or too few scored levels).
"""

from __future__ import annotations

import csv
import html
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scoring.core.longdoc import embedder_warning
from scoring.stress.perturb import TESTS, StressError
from scoring.stress.stats import StressResult, Verdict

if TYPE_CHECKING:
    from scoring.stress.runner import StressReport

__all__ = ["CSV_FIELDS", "level_figure", "render_html", "write_report"]

CSV_FIELDS = (
    "metric", "test", "direction", "n_rows", "levels", "level_means", "rho", "monotonicity",
    "cohens_d", "mean_abs_change", "rho_verdict", "m_verdict", "verdict",
)  # fmt: skip

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
    Path(files["json"]).write_text(
        json.dumps(report.to_dict(), indent=2, ensure_ascii=False, allow_nan=False), encoding="utf-8"
    )
    with open(files["results_csv"], "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for r in report.results:
            d = r.to_dict()
            row = {k: d[k] for k in CSV_FIELDS}
            row["levels"] = "|".join(r.levels)
            row["level_means"] = "|".join("" if m is None else f"{m:.6g}" for m in d["level_means"])
            writer.writerow(row)
    with open(files["scores_csv"], "w", newline="", encoding="utf-8") as fh:
        fields = ["row_id", "test", "level", "label", "variant", "metric", "score", "error"]
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        for s in report.scores:
            writer.writerow(s.to_dict())
    Path(files["html"]).write_text(render_html(report), encoding="utf-8")
    return report


# -- HTML ----------------------------------------------------------------------------------


def _grid(report: StressReport) -> str:
    tests = [t for t in report.tests if t in {r.test for r in report.results}]
    by = {(r.metric, r.test): r for r in report.results}
    head1 = "".join(
        f'<th colspan="2" title="{_e(TESTS[t].description)}">{_e(t)}<br><small>{_e(TESTS[t].direction.value)}</small></th>'
        for t in tests
    )
    head2 = "".join("<th>&rho;</th><th>M</th>" for _ in tests)
    body = []
    for m in report.metrics:
        cells = []
        for t in tests:
            r = by.get((m, t))
            if r is None:
                cells.append("<td></td><td></td>")
                continue
            rho_txt = "n/a" if r.rho_verdict is Verdict.NOT_APPLICABLE else _num(r.rho)
            cells.append(
                f'<td style="background:{_COLOURS[r.rho_verdict]}" title="{_e(r.rho_verdict.value)}">{rho_txt}</td>'
                f'<td style="background:{_COLOURS[r.m_verdict]}" title="{_e(r.m_verdict.value)}">{_num(r.monotonicity)}</td>'
            )
        passed = sum(1 for t in tests if (m, t) in by and by[(m, t)].passed)
        body.append(f"<tr><th>{_e(m)}</th>{''.join(cells)}<td>{passed}/{len(tests)}</td></tr>")
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


def _reference_level(r: StressResult) -> int:
    # Incremental addition ends at the original summary; every other test starts from it.
    return len(r.level_means) - 1 if r.test == "incremental" else 0


PANEL_COLUMNS = 4


def level_figure(report: StressReport, test: str) -> Any:
    """Mean score by perturbation level for one test: small multiples, one panel per metric, each on its own
    y axis, so that a metric moving 200-fold beside others moving 5% flattens none of them. The dashed line
    is the unperturbed summary's mean. Returns a matplotlib ``Figure`` (object API, no pyplot state)."""
    # matplotlib is heavy: loaded when a report is drawn, not when the stress package is imported.
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    # Level and metric names drawn as written, not parsed as mathtext (analysis.report.plots.plain_text).
    with rc_context({"text.parse_math": False}):
        return _level_figure(report, test, Figure)


def _level_figure(report: StressReport, test: str, Figure: Any) -> Any:  # noqa: N803
    res = [r for r in report.results if r.test == test]
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
        ys = [m if math.isfinite(m) else math.nan for m in r.level_means]
        ax.plot(xs, ys, marker="o", markersize=3, color=_PALETTE[k % len(_PALETTE)], linewidth=1.5)
        ref = r.level_means[_reference_level(r)] if r.level_means else math.nan
        if math.isfinite(ref):
            ax.axhline(ref, color="#888888", linestyle="--", linewidth=0.8)
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
    ref_name = "the full summary" if test == "incremental" else "the original"
    fig.suptitle(f"{test} ({TESTS[test].direction.value}): mean score; dashed = {ref_name}", fontsize=10)
    fig.tight_layout()
    return fig


def _svg(fig: Any) -> str:
    import io
    import re

    from matplotlib import rc_context
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    buf = io.StringIO()
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "satisfy-stress"}):
        FigureCanvasSVG(fig).print_svg(buf)  # type: ignore[no-untyped-call]
    text = re.sub(r"^<\?xml[^>]*>\s*", "", buf.getvalue())
    return re.sub(r"<!DOCTYPE[^>]*>\s*", "", text)


def _test_plots(report: StressReport) -> str:
    out = [_svg(level_figure(report, test)) for test in report.tests if any(r.test == test for r in report.results)]
    return "".join(f'<div class="plot">{p}</div>' for p in out)


def _meaning_preserving(report: StressReport) -> str:
    tests = [t for t in report.tests if TESTS[t].group == "meaning-preserving"]
    if not tests:
        return ""
    by = {(r.metric, r.test): r for r in report.results}
    head = "".join(f"<th>{_e(t)}</th>" for t in tests)
    rows = []
    for m in report.metrics:
        cells = []
        for t in tests:
            r = by.get((m, t))
            if r is None:
                cells.append("<td></td>")
                continue
            base = r.level_means[0]
            rel = r.mean_abs_change / abs(base) if math.isfinite(base) and base != 0 else math.nan
            shade = "#ffffff" if not math.isfinite(rel) else f"rgba(214,39,40,{min(1.0, rel * 4):.2f})"
            rel_txt = f" ({rel:.0%})" if math.isfinite(rel) else ""
            cells.append(f'<td style="background:{shade}">{_num(r.mean_abs_change, 4)}{rel_txt}</td>')
        rows.append(f"<tr><th>{_e(m)}</th>{''.join(cells)}</tr>")
    return (
        "<h2>Meaning-preserving perturbations</h2><p>Mean absolute score change from the original "
        "(share of the original mean in brackets; darker is less stable).</p>"
        f'<table class="heat"><thead><tr><th>metric</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


def _rewrites(report: StressReport) -> str:
    if not report.rewrites:
        return ""
    rows = []
    for test in report.tests:
        recs = [r for r in report.rewrites if r.test == test]
        if not recs:
            continue
        flagged = [r for r in recs if r.sanity is not None and r.sanity.flagged]
        failed = [r for r in recs if r.text is None]
        sims = [r.sanity.similarity for r in recs if r.sanity is not None]
        mean_sim = sum(sims) / len(sims) if sims else math.nan
        rows.append(
            f"<tr><th>{_e(test)}</th><td>{len(recs)}</td><td>{len(failed)}</td><td>{len(flagged)}</td>"
            f"<td>{_num(mean_sim)}</td><td>v{recs[0].prompt_version}</td></tr>"
        )
    examples = [r for r in report.rewrites if r.sanity is not None and r.sanity.flagged][:10]
    ex_html = "".join(
        f"<li><b>{_e(r.test)}</b> {_e(r.row_id)} ({_e(r.label)}): {_e('; '.join(r.sanity.reasons) if r.sanity else '')}"
        "</li>"
        for r in examples
    )
    return (
        "<h2>LLM rewrites</h2><table><thead><tr><th>test</th><th>rewrites</th><th>failed</th><th>flagged</th>"
        f"<th>mean similarity</th><th>prompt</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        + (f"<p>Flagged rewrites (first {len(examples)}):</p><ul>{ex_html}</ul>" if examples else "")
    )


def _long_document(report: StressReport) -> str:
    ld = report.long_document
    if ld is None:
        return ""
    d: dict[str, Any] = ld.to_dict()
    windows = [str(w) for w in d["windows"]]
    sweep = {m: [v for v in vals] for m, vals in d["window_means"].items()}
    bins = d["bin_labels"]
    by_bin = {m: [v for v in vals] for m, vals in d["bin_means"].items()}
    counts = ", ".join(f"{lab}: {c}" for lab, c in zip(bins, d["bin_counts"], strict=True))
    warning = embedder_warning(str(d["embedder"]))
    return (
        "<h2>Long documents</h2>"
        f"<p>{_e(d['n_documents'])} documents, {_e(d['n_sentences'])} summary sentences, top-K = {_e(d['top_k'])}, "
        f"sentence embedder <code>{_e(d['embedder'])}</code>.</p>"
        + (f'<p class="warning"><b>Warning:</b> {_e(warning)}</p>' if warning else "")
        + '<div class="plot">'
        + line_chart(sweep, [f"w={w}" for w in windows], title="Retrieval window sweep", y_label="mean score")
        + '</div><div class="plot">'
        + line_chart(
            by_bin, bins, title=f"Score per claim-similarity bin (w={d['bin_window']})", y_label="mean sentence score"
        )
        + f"</div><p>Sentences per bin: {_e(counts)}</p>"
    )


def _timings(report: StressReport) -> str:
    rows = "".join(
        f"<tr><td>{_e(t.stage)}</td><td>{_e(t.group)}</td><td>{_e(', '.join(t.metrics))}</td>"
        f"<td>{t.seconds:.3f}</td><td>{t.n_texts}</td></tr>"
        for t in report.timings
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


def render_html(report: StressReport) -> str:
    prov = report.provenance
    prov_rows = "".join(
        f"<tr><th>{_e(k)}</th><td><code>{_e(json.dumps(v, ensure_ascii=False))}</code></td></tr>"
        for k, v in prov.items()
    )
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>Metric stress tests</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<h1>Metric stress tests</h1><p>{report.n_rows} summaries, {len(report.metrics)} metrics, "
        f"{len(report.tests)} tests, seed {report.seed}. Pass: |&rho;| &ge; 0.4 in the expected direction "
        "(|&rho;| &le; 0.2 for stable tests) and M &ge; 0.5; a stable test over two levels is judged by M alone.</p>"
        "<p id=definitions><b>&rho;</b> (rho) is Spearman's rank correlation between the perturbation level (0, 1, "
        "2, ...) and the metric's mean score at that level: &minus;1 when every step lowers the score, +1 when "
        "every step raises it, near 0 when the score does not follow the level. <b>M</b> (monotonicity) is the "
        "share of steps from one level to the next that move the score the expected way (down, up, or, for a "
        "stable test, by under 5% of the original score): 1 when every step does.</p>"
        f"{_grid(report)}<h2>Mean score by perturbation level</h2>"
        "<p>One panel per metric, each on its own scale (a metric moving 200-fold beside others moving 5% would "
        "flatten them on a shared axis); the dashed line is the unperturbed summary's mean.</p>"
        f"{_test_plots(report)}"
        f"{_meaning_preserving(report)}{_rewrites(report)}{_long_document(report)}"
        f"<h2>Provenance</h2><table>{prov_rows}</table>{_timings(report)}</body></html>"
    )
