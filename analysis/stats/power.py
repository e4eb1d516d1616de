"""Power planning: how many annotators a study needs to detect a personalisation effect, by simulation through
the project's own inference (the win-rate test the report makes).

Each candidate size ``G`` gets ``reps`` simulated studies of ``G`` annotators (``synthetic.simulate_comparisons``:
two models, each with a personalised and a generic summary, a four-candidate bracket per question, annotators
with their own taste for personalisation), and each study's personalised-vs-generic win rate in mixed matches is
tested against 0.5 as ``win_rates`` tests it: CR2 with t(G-1) below ``small_sample_below`` annotators, the
clustered bootstrap from there on (``inference="auto"``, docs/analysis.md). Power is the share rejected at
``alpha``, with a Wilson interval for the simulation's own error; the plan recommends the smallest size whose
power reaches the target.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps

from analysis.stats._results import ResultMixin, fmt, text_table
from analysis.stats.bootstrap import ClusterResampler, bootstrap_ratios
from analysis.stats.null_simulation import null_studies, persona_cell_sums
from analysis.stats.small_sample import BOOTSTRAP, CR2_T, DEFAULT_SMALL_SAMPLE_BELOW


@dataclass(frozen=True)
class PowerPoint(ResultMixin):
    """Rejections of "personalised and generic summaries win equally often" over ``reps`` studies of one size."""

    n_annotators: int
    reps: int
    rejections: int
    method: str
    mean_win_rate: float
    """The personalised side's share of decided mixed matches, averaged over the simulated studies."""

    @property
    def power(self) -> float:
        return self.rejections / self.reps

    def interval(self, confidence_level: float = 0.95) -> tuple[float, float]:
        """Wilson interval of the power (the simulation's error, not the study's)."""
        z = float(sps.norm.ppf(0.5 + confidence_level / 2))
        n, p = self.reps, self.power
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class PowerPlan(ResultMixin):
    effect: float
    taste_sd: float
    queries: int
    alpha: float
    target: float
    seed: int
    points: tuple[PowerPoint, ...]
    recommended: int | None
    """The smallest simulated size with power at or above ``target``; ``None`` when none reached it."""
    notes: tuple[str, ...] = field(default=())

    def summary(self) -> str:
        rows = []
        for p in self.points:
            low, high = p.interval()
            rows.append(
                [
                    str(p.n_annotators),
                    fmt(p.power, 3),
                    f"[{fmt(low, 3)}, {fmt(high, 3)}]",
                    p.method,
                    fmt(p.mean_win_rate, 3),
                ]
            )
        head = (
            f"Power to detect a persona effect of {self.effect:+.2f} log-odds (annotator taste SD {self.taste_sd}, "
            f"{self.queries} questions each) at alpha {self.alpha}; {self.points[0].reps if self.points else 0} "
            "simulated studies per size."
        )
        table = text_table(["annotators", "power", "95% sim. interval", "test", "mean win rate"], rows)
        verdict = (
            f"Recommended: {self.recommended} annotators (power >= {self.target})."
            if self.recommended is not None
            else f"No simulated size reached power {self.target}: try larger sizes or more questions each."
        )
        return "\n".join([head, table, verdict, *self.notes])


def simulate_power(
    n_annotators: int,
    *,
    effect: float,
    taste_sd: float = 0.5,
    queries: int = 8,
    reps: int = 200,
    alpha: float = 0.05,
    resamples: int = 999,
    seed: int = 0,
    small_sample_below: int = DEFAULT_SMALL_SAMPLE_BELOW,
) -> PowerPoint:
    """Power of the personalised-vs-generic win-rate test at one size (module docstring)."""
    if n_annotators < 2:
        raise ValueError("a clustered test needs at least 2 annotators")
    if reps < 1:
        raise ValueError("reps must be at least 1")
    g = n_annotators
    method = CR2_T if g < small_sample_below else BOOTSTRAP
    rejected = 0
    rates: list[float] = []
    for t, first in null_studies(g, reps, seed=seed, taste_sd=taste_sd, queries=queries, effect=effect):
        k = min(t.n_annotators // g, reps - first)
        wins, decided = persona_cell_sums(t, g, k)
        resampler = ClusterResampler.draw(g, n_resamples=resamples, seed=seed + first)
        result = bootstrap_ratios(
            wins, decided, resampler=resampler, null=np.full(k, 0.5), confidence_level=1 - alpha, method=method
        )
        rejected += int(np.sum(np.isfinite(result.p_value) & (result.p_value < alpha)))
        rates.extend(float(r) for r in result.estimate if math.isfinite(r))
    return PowerPoint(
        n_annotators=g,
        reps=reps,
        rejections=rejected,
        method=method,
        mean_win_rate=float(np.mean(rates)) if rates else math.nan,
    )


def plan_power(
    sizes: Sequence[int],
    *,
    effect: float,
    target: float = 0.8,
    taste_sd: float = 0.5,
    queries: int = 8,
    reps: int = 200,
    alpha: float = 0.05,
    resamples: int = 999,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> PowerPlan:
    """Power at each size in ``sizes`` and the smallest one reaching ``target``; ``progress(done, total)`` is
    called after each size (the research page's job shows it)."""
    if not sizes:
        raise ValueError("give at least one number of annotators")
    if not 0 < target < 1:
        raise ValueError("target power must be between 0 and 1")
    if not 0 < alpha < 1:
        raise ValueError("alpha must be between 0 and 1")
    if queries < 1:
        raise ValueError("questions per annotator must be at least 1")
    if taste_sd < 0:
        raise ValueError("taste_sd must be non-negative")
    ordered = sorted(set(sizes))
    simulated: list[PowerPoint] = []
    for g in ordered:
        simulated.append(
            simulate_power(
                g,
                effect=effect,
                taste_sd=taste_sd,
                queries=queries,
                reps=reps,
                alpha=alpha,
                resamples=resamples,
                seed=seed,
            )  # fmt: skip
        )
        if progress is not None:
            progress(len(simulated), len(ordered))
    points = tuple(simulated)
    reached = [p.n_annotators for p in points if p.power >= target]
    notes = []
    if effect == 0:
        notes.append("The effect is 0: 'power' is the false-positive rate, which should be near alpha.")
    return PowerPlan(
        effect=effect,
        taste_sd=taste_sd,
        queries=queries,
        alpha=alpha,
        target=target,
        seed=seed,
        points=points,
        recommended=reached[0] if reached else None,
        notes=tuple(notes),
    )
