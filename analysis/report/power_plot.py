"""The power plan's plot: simulated power against the number of annotators, with the target."""

from __future__ import annotations

from matplotlib.figure import Figure

from analysis.report.plots import PALETTE, figure_svg, plain_text
from analysis.stats.power import PowerPlan


@plain_text
def power_plot(plan: PowerPlan) -> str:
    fig = Figure(figsize=(6.0, 3.4))
    ax = fig.add_subplot()
    xs = [p.n_annotators for p in plan.points]
    ys = [p.power for p in plan.points]
    intervals = [p.interval() for p in plan.points]
    ax.fill_between(xs, [lo for lo, _ in intervals], [hi for _, hi in intervals], color=PALETTE[0], alpha=0.2)
    ax.plot(xs, ys, "o-", color=PALETTE[0], label="simulated power (95% simulation interval)")
    ax.axhline(plan.target, color=PALETTE[1], linestyle="--", linewidth=1, label=f"target {plan.target:g}")
    if plan.recommended is not None:
        ax.axvline(plan.recommended, color="#777777", linestyle=":", linewidth=1)
        ax.annotate(f"{plan.recommended} annotators", (plan.recommended, 0.04), fontsize=8, color="#444444")
    ax.set_ylim(0.0, 1.0)
    ax.set_xlabel("annotators")
    ax.set_ylabel("power")
    ax.set_title(
        f"Persona effect {plan.effect:+.2f} log-odds, taste SD {plan.taste_sd}, {plan.queries} questions each",
        fontsize=10,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return figure_svg(fig)
