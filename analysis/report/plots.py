"""SVG plots for the HTML report, drawn with matplotlib's object API (no pyplot state, no files), each from the
figure data ``analysis.report.content`` computed; ``draw_figures`` is the one way in for the other renderers."""

from __future__ import annotations

import functools
import io
import math
import re
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

from matplotlib import rc_context
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure as MplFigure
from matplotlib.patches import Patch

from analysis.report.content import AlphaFigure, Figure, IntervalFigure, StrengthFigure, SweepFigure

P = ParamSpec("P")
R = TypeVar("R")
PALETTE = ("#1b6ca8", "#d1495b", "#66a182", "#edae49", "#00798c", "#8e6c8a", "#4d4d4d", "#a3a380")


def figure_svg(fig: MplFigure) -> str:
    """One matplotlib figure as inline SVG (no XML header, a fixed hash salt so ids do not change)."""
    buf = io.StringIO()
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "satisfy-report"}):
        FigureCanvasSVG(fig).print_svg(buf)
    text = buf.getvalue()
    text = re.sub(r"^<\?xml[^>]*>\s*", "", text)
    text = re.sub(r"<!DOCTYPE[^>]*>\s*", "", text)
    return text


def plain_text(plot: Callable[P, R]) -> Callable[P, R]:
    """Draw ``plot``'s texts as written: labels are system, model and metric names, and a ``$`` in one is a dollar
    sign, not mathtext to parse (``sys$\\frac$`` as a model's name failed the whole report). Matplotlib reads the
    setting when each text is made, so it holds while the figure is built."""

    @functools.wraps(plot)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with rc_context({"text.parse_math": False}):
            return plot(*args, **kwargs)

    return wrapper


def _finite(x: float) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


@plain_text
def interval_plot(
    rows: Sequence[tuple[str, float, float, float]],
    *,
    title: str,
    reference: float | None = 0.5,
    xlabel: str = "share of decided matches",
    log: bool = False,
    xlim: tuple[float, float] | None = (0.0, 1.0),
) -> str:
    """Point estimates with horizontal intervals, one row per label (top to bottom)."""
    fig = MplFigure(figsize=(7.0, 0.42 * max(len(rows), 2) + 1.1))
    ax = fig.add_subplot()
    ys = list(range(len(rows)))[::-1]
    for y, (_label, est, low, high) in zip(ys, rows, strict=True):
        if _finite(low) and _finite(high):
            ax.plot([low, high], [y, y], color=PALETTE[0], linewidth=2)
        if _finite(est):
            ax.plot([est], [y], "o", color=PALETTE[1], markersize=6)
    if reference is not None:
        ax.axvline(reference, color="#777777", linestyle="--", linewidth=1)
    ax.set_yticks(ys)
    ax.set_yticklabels([r[0] for r in rows])
    if log:
        ax.set_xscale("log")
    elif xlim is not None:
        ax.set_xlim(*xlim)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=11)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return figure_svg(fig)


@plain_text
def alpha_plot(figure: AlphaFigure) -> str:
    metrics = list(figure.bars)
    families = sorted({m.family for m in metrics})
    colour = {f: PALETTE[i % len(PALETTE)] for i, f in enumerate(families)}
    fig = MplFigure(figsize=(7.0, 0.3 * max(len(metrics), 3) + 1.2))
    ax = fig.add_subplot()
    ys = list(range(len(metrics)))[::-1]
    values = [m.alpha if _finite(m.alpha) else 0.0 for m in metrics]
    ax.barh(ys, values, color=[colour[m.family] for m in metrics])
    ax.axvline(0.0, color="#333333", linewidth=1)
    ax.set_yticks(ys)
    ax.set_yticklabels([m.metric for m in metrics], fontsize=8)
    ax.set_xlabel(f"Krippendorff's alpha ({figure.level}), metric vs annotator")
    ax.set_title("Metric-human agreement by family", fontsize=11)
    handles = [Patch(color=colour[f], label=f) for f in families]
    ax.legend(handles=handles, fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return figure_svg(fig)


@plain_text
def threshold_sweep_plot(figure: SweepFigure) -> str:
    """Alpha against the "neither" threshold (in pooled SDs of each metric), one line per metric, one panel
    per family; a marker shows the threshold each metric actually used."""
    fig = MplFigure(figsize=(7.0, 2.4 * max(len(figure.panels), 1) + 0.6))
    if not figure.panels:
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, "no metric with a threshold to sweep", ha="center", va="center")
        ax.set_axis_off()
        return figure_svg(fig)
    axes = fig.subplots(len(figure.panels), 1, squeeze=False, sharex=True)[:, 0]
    for ax, (family, lines) in zip(axes, figure.panels, strict=True):
        for i, line in enumerate(lines):
            colour = PALETTE[i % len(PALETTE)]
            ax.plot(
                [x for x, _ in line.points],
                [y for _, y in line.points],
                "-",
                color=colour,
                linewidth=1.5,
                label=line.metric,
            )
            if line.chosen is not None:
                ax.plot([line.chosen[0]], [line.chosen[1]], "o", color=colour, markersize=6)
        ax.axhline(0.0, color="#333333", linewidth=0.8)
        ax.set_title(family, fontsize=9)
        ax.set_ylabel("alpha", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    axes[-1].set_xlabel('threshold for "neither" (pooled standard deviations of the metric)')
    fig.suptitle("Agreement against the similarity threshold (dot: threshold used)", fontsize=11)
    fig.tight_layout()
    return figure_svg(fig)


@plain_text
def strength_plot(figure: StrengthFigure) -> str:
    """Finite log-strengths with their intervals (an interval end at infinity drawn to the edge, with an
    arrow); a system with an infinite strength is a labelled arrow at the edge it lies beyond ("always won" on
    the right, "never won" on the left), so that the finite ones keep a readable scale."""
    systems = list(figure.systems)
    finite = [v for s in systems for v in (s.log_strength, s.ci_low, s.ci_high) if _finite(v)]
    low, high = (min(finite), max(finite)) if finite else (-1.0, 1.0)
    pad = max(0.5, 0.15 * (high - low))
    left, right = low - pad, high + pad
    fig = MplFigure(figsize=(7.0, 0.42 * max(len(systems), 2) + 1.1))
    ax = fig.add_subplot()
    ys = list(range(len(systems)))[::-1]
    for y, s in zip(ys, systems, strict=True):
        if s.unbounded in ("above", "below"):
            edge, mark, align = (right, ">", "right") if s.unbounded == "above" else (left, "<", "left")
            ax.plot([edge], [y], mark, color=PALETTE[1], markersize=9, clip_on=False)
            words = "always won: +∞ " if s.unbounded == "above" else " never won: −∞"
            ax.text(edge, y + 0.22, words, ha=align, va="bottom", fontsize=8, color="#444444")
            continue
        if s.unbounded:
            ax.text((left + right) / 2, y, "not comparable", ha="center", va="center", fontsize=8, color="#444444")
            continue
        lo = s.ci_low if _finite(s.ci_low) else (left if s.ci_low < 0 else right)
        hi = s.ci_high if _finite(s.ci_high) else (right if s.ci_high > 0 else left)
        if _finite(lo) and _finite(hi):
            ax.plot([lo, hi], [y, y], color=PALETTE[0], linewidth=2)
        for end, value, mark in ((lo, s.ci_low, "<"), (hi, s.ci_high, ">")):
            if not _finite(value):
                ax.plot([end], [y], mark, color=PALETTE[0], markersize=7, clip_on=False)
        if _finite(s.log_strength):
            ax.plot([s.log_strength], [y], "o", color=PALETTE[1], markersize=6)
    ax.axvline(0.0, color="#777777", linestyle="--", linewidth=1)
    ax.set_yticks(ys)
    ax.set_yticklabels([s.system for s in systems])
    ax.set_xlim(left, right)
    ax.set_xlabel("log strength (arrows: beyond the axis, infinite)")
    centre = "mean 0 over the finite ones" if figure.separated else "mean 0"
    ax.set_title(f"Bradley-Terry log-strengths ({centre})", fontsize=11)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return figure_svg(fig)


def draw(figure: Figure) -> str:
    """One figure of the report as SVG."""
    if isinstance(figure, IntervalFigure):
        return interval_plot(
            figure.rows,
            title=figure.title,
            reference=figure.reference,
            xlabel=figure.xlabel,
            log=figure.log,
            xlim=figure.xlim,
        )
    if isinstance(figure, AlphaFigure):
        return alpha_plot(figure)
    if isinstance(figure, SweepFigure):
        return threshold_sweep_plot(figure)
    return strength_plot(figure)


def draw_figures(figures: Sequence[Figure]) -> dict[str, str]:
    """Every figure of the report as SVG, by its key."""
    return {figure.key: draw(figure) for figure in figures}
