"""Win rates of variants, models and conditions, head-to-head rates, "neither" rates and position bias.

Every rate comes with an annotator-clustered bootstrap interval; where a 50/50 null makes sense
(decided matches only, "neither" left out), with a two-sided bootstrap p-value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import combinations

import numpy as np
import numpy.typing as npt
import pandas as pd

from analysis.stats._results import ResultMixin, fmt, fmt_p, text_table
from analysis.stats.bootstrap import ClusterResampler, bootstrap_ratios
from analysis.stats.multiplicity import HOLM, PValueFamily, p_value_family
from analysis.stats.small_sample import BOOTSTRAP, CR2_T
from analysis.stats.table import (
    ADAPTIVE_STAGE,
    ADVANCED_COLUMN,
    BRACKET_COLUMN,
    PreparedTable,
    has_conditions,
    placement_recorded,
    stage_key,
    stage_order,
)

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class WinRate(ResultMixin):
    """How often one side of a comparison wins.

    ``rate`` is ``wins / n`` with the denominator the statistic names (all matches, or for a
    variant's final its round-1 wins). ``decided_rate`` is ``wins / (wins + losses)``; the
    interval and the p-value (against ``null``) are for ``decided_rate``; ``rate_ci_*`` is the
    clustered interval of ``rate``. ``n_annotators`` counts annotators with a decided match in the cell.
    """

    statistic: str
    group: str
    stage: str
    wins: int
    losses: int
    neither: int
    n: int
    rate: float
    decided_rate: float
    ci_low: float
    ci_high: float
    p_value: float
    null: float
    rate_ci_low: float
    rate_ci_high: float
    n_annotators: int
    n_valid_resamples: int
    p_adjusted: float = float("nan")
    """``p_value`` adjusted for multiplicity within its statistic's family (``WinRateTable.families``)."""

    @property
    def decided(self) -> int:
        return self.wins + self.losses


@dataclass(frozen=True)
class Proportion(ResultMixin):
    """A share of matches (e.g. "neither" picks) with a clustered-bootstrap interval; no null test."""

    statistic: str
    group: str
    stage: str
    count: int
    n: int
    estimate: float
    ci_low: float
    ci_high: float
    n_annotators: int
    n_valid_resamples: int


@dataclass(frozen=True)
class StageSummary(ResultMixin):
    """How many matches of one stage the table holds (a stage section of the report)."""

    stage: str
    matches: int
    decided: int
    neither: int
    n_annotators: int


def stage_summaries(t: PreparedTable) -> tuple[StageSummary, ...]:
    """One summary per stage present, first round first, the final last."""
    out = []
    for stage in stage_order(t.stage):
        rows = np.asarray(t.stage == stage, dtype=np.bool_)
        out.append(
            StageSummary(
                stage=stage,
                matches=int(rows.sum()),
                decided=int((rows & t.decided).sum()),
                neither=int((rows & t.neither).sum()),
                n_annotators=int(np.unique(t.annotator_code[rows]).size),
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class WinRateTable(ResultMixin):
    """All win-rate cells of an analysis, with the bootstrap settings that produced them."""

    rows: tuple[WinRate, ...]
    neither: tuple[Proportion, ...]
    n_resamples: int
    seed: int
    confidence_level: float
    method: str = BOOTSTRAP
    """How intervals and p-values were computed: ``cluster-bootstrap`` or ``cr2-t`` (small samples)."""
    families: tuple[PValueFamily, ...] = ()
    """One family of tests per statistic, with the multiplicity method that adjusted ``WinRate.p_adjusted``."""

    def select(self, statistic: str, stage: str | None = None) -> tuple[WinRate, ...]:
        return tuple(r for r in self.rows if r.statistic == statistic and (stage is None or r.stage == stage))

    def get(self, statistic: str, group: str, stage: str) -> WinRate:
        for r in self.rows:
            if (r.statistic, r.group, r.stage) == (statistic, group, stage):
                return r
        raise KeyError((statistic, group, stage))

    def to_frame(self) -> pd.DataFrame:
        """One row per cell, the adjusted p-value beside the raw one."""
        frame = pd.DataFrame([r.to_dict() for r in self.rows])
        if "p_adjusted" in frame.columns:
            columns = [c for c in frame.columns if c != "p_adjusted"]
            columns.insert(columns.index("p_value") + 1, "p_adjusted")
            frame = frame[columns]
        return frame

    def neither_frame(self) -> pd.DataFrame:
        return pd.DataFrame([r.to_dict() for r in self.neither])

    def summary(self) -> str:
        adjusted = f"p ({self.families[0].method})" if self.families else "p adjusted"
        headers = [
            "statistic",
            "group",
            "stage",
            "wins/n",
            "rate",
            "decided",
            f"{self.confidence_level:.0%} CI",
            "p",
            adjusted,
        ]
        body = [
            [
                r.statistic,
                r.group,
                r.stage,
                f"{r.wins}/{r.n}",
                fmt(r.rate),
                fmt(r.decided_rate),
                f"[{fmt(r.ci_low)}, {fmt(r.ci_high)}]",
                fmt_p(r.p_value),
                fmt_p(r.p_adjusted),
            ]
            for r in self.rows
        ]
        neither = [
            [
                p.statistic,
                p.group,
                p.stage,
                f"{p.count}/{p.n}",
                fmt(p.estimate),
                "",
                f"[{fmt(p.ci_low)}, {fmt(p.ci_high)}]",
                "",
                "",
            ]
            for p in self.neither
        ]
        how = (
            "CR2 standard errors with t(G-1) intervals and p-values (few annotators)"
            if self.method == CR2_T
            else f"annotator-clustered bootstrap, {self.n_resamples} resamples, seed {self.seed}"
        )
        families = "".join(f"\n  {f.sentence()}" for f in self.families)
        return (
            f"Win rates ({how})\n"
            + text_table(headers, body + neither)
            + (f"\nMultiple testing, one family per statistic:{families}" if families else "")
        )


@dataclass(frozen=True)
class _Cell:
    """Row indicators of one cell. Kept as booleans (one byte a row, not eight): a million-row table has
    dozens of cells, and only their per-annotator sums are used."""

    statistic: str
    group: str
    stage: str
    wins: BoolArray | FloatArray
    losses: BoolArray | FloatArray
    neither: BoolArray | FloatArray
    n: BoolArray | FloatArray
    null: float


def _side_cell(
    statistic: str,
    group: str,
    stage: str,
    left_is: BoolArray,
    right_is: BoolArray,
    t: PreparedTable,
    rows: BoolArray,
    null: float,
) -> _Cell:
    """Cell for "the side that is ``group``": rows where it is on exactly one side."""
    one_side = (left_is ^ right_is) & rows
    wins = one_side & ((left_is & t.left_won) | (right_is & t.right_won))
    losses = one_side & ((left_is & t.right_won) | (right_is & t.left_won))
    neither = one_side & t.neither
    return _Cell(statistic, group, stage, wins, losses, neither, one_side, null)


def _share_cell(
    statistic: str, group: str, stage: str, winner_is: BoolArray, t: PreparedTable, rows: BoolArray, null: float
) -> _Cell:
    """Cell for "share of decided matches won by ``group``" (the paper's per-model aggregate)."""
    decided = rows & t.decided
    wins = decided & winner_is
    losses = decided & ~winner_is
    return _Cell(statistic, group, stage, wins, losses, rows & t.neither, rows, null)


def _stage_masks(t: PreparedTable) -> dict[str, BoolArray]:
    """Stages present in the table, first round first and the final last, plus "all" when there is more
    than one (a 2-system study has only a final; 8 systems have round1, round2 and final)."""
    masks = {s: np.asarray(t.stage == s, dtype=np.bool_) for s in stage_order(t.stage)}
    if len(masks) > 1:
        masks["all"] = np.ones(t.n_rows, dtype=np.bool_)
    return masks


def bracket_pair_order(t: PreparedTable) -> list[str]:
    """Bracket pairs present, by the stage they are played in (``AB, CD, EF, GH, ABCD, EFGH, final``)."""
    first_stage: dict[str, tuple[int, int]] = {}
    for pair, stage in zip(t.bracket_pair, t.stage, strict=True):
        if pair is None:
            continue
        key = stage_key(str(stage))
        first_stage[str(pair)] = min(first_stage.get(str(pair), key), key)
    return sorted(first_stage, key=lambda p: (first_stage[p], len(p), p))


def advanced(t: PreparedTable) -> tuple[BoolArray, BoolArray]:
    """Rows whose left (right) side went on to the next round: it won, or the match was a tie whose coin sent
    it on (``advanced_side``; without that column a tie sends no one on)."""
    left, right = t.left_won.copy(), t.right_won.copy()
    if ADVANCED_COLUMN in t.frame.columns:
        side = t.frame[ADVANCED_COLUMN].astype("string").to_numpy(dtype=object, na_value=None)
        left |= t.tie & (side == "left")
        right |= t.tie & (side == "right")
    return left, right


def arrived_without_playing(t: PreparedTable) -> tuple[BoolArray, BoolArray]:
    """Rows whose left (right) system reached the row's stage by a bye: the bracket (``bracket_id``) has rows
    of the stage before, but none of them is this system's. None without a ``bracket_id`` column, and none in
    a bracket without rows of the stage before (a 2-system bracket's final in a table that mixes sizes)."""
    none = np.zeros(t.n_rows, dtype=np.bool_)
    if BRACKET_COLUMN not in t.frame.columns:
        return none, none.copy()
    order = stage_order(t.stage)
    stage_index = np.asarray(pd.Series(t.stage, dtype=object).map({s: i for i, s in enumerate(order)}), dtype=np.int64)
    bracket, _ = pd.factorize(t.frame[BRACKET_COLUMN].astype("string"), use_na_sentinel=True)
    systems, _ = pd.factorize(np.concatenate([t.left_system, t.right_system]), use_na_sentinel=True)
    n_stages, n_systems = len(order), int(systems.max(initial=0)) + 1
    left_system, right_system = systems[: t.n_rows].astype(np.int64), systems[t.n_rows :].astype(np.int64)
    bracket = bracket.astype(np.int64)
    known = (bracket >= 0) & (stage_index > 0)

    def key(system: npt.NDArray[np.int64], stage: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return np.asarray((bracket * (n_systems + 1) + system + 1) * n_stages + stage, dtype=np.int64)

    played = np.concatenate([key(left_system, stage_index), key(right_system, stage_index)])
    bracket_stages = bracket * n_stages + stage_index
    before = stage_index - 1
    bracket_had_before = np.isin(bracket * n_stages + before, bracket_stages)
    left = known & bracket_had_before & ~np.isin(key(left_system, before), played)
    right = known & bracket_had_before & ~np.isin(key(right_system, before), played)
    return np.asarray(left, dtype=np.bool_), np.asarray(right, dtype=np.bool_)


def _levels(*arrays: npt.NDArray[np.object_]) -> list[str]:
    return sorted({str(v) for v in pd.unique(np.concatenate(arrays)) if v is not None})


def variant_label(model: str, condition: str) -> str:
    return f"{model} / {condition}"


def build_cells(t: PreparedTable, *, persona: str = "persona", generic: str = "generic") -> list[_Cell]:
    """Every win-rate cell the report shows (see ``docs/analysis.md`` for the definitions)."""
    stages = _stage_masks(t)
    cells: list[_Cell] = []

    # Variants (model x condition): the first stage out of all its matches; every later stage out of the
    # variant's advances into it (the paper's "final out of the variant's round-1 wins", plus the ties whose
    # coin sent it on and the byes that brought it there without a match).
    played = [s for s in stages if s != "all"]
    if not has_conditions(t):
        # Judgments from outside: no persona/generic design, so a win rate per system over all its matches.
        for system in _levels(t.left_system, t.right_system):
            left_is = np.asarray(t.left_system == system, dtype=np.bool_)
            right_is = np.asarray(t.right_system == system, dtype=np.bool_)
            for stage, rows in stages.items():
                cells.append(_side_cell("system", system, stage, left_is, right_is, t, rows, 0.5))
    left_went_on, right_went_on = advanced(t)
    left_arrived, right_arrived = arrived_without_playing(t)
    for model in _levels(t.left_model, t.right_model):
        for condition in _levels(t.left_condition, t.right_condition):
            left_is = np.asarray((t.left_model == model) & (t.left_condition == condition), dtype=np.bool_)
            right_is = np.asarray((t.right_model == model) & (t.right_condition == condition), dtype=np.bool_)
            if not (left_is | right_is).any():
                continue
            label = variant_label(model, condition)
            one_side = left_is ^ right_is
            went_on = one_side & ((left_is & left_went_on) | (right_is & right_went_on))
            arrived = one_side & ((left_is & left_arrived) | (right_is & right_arrived))
            previous: str | None = None
            for stage in played:
                cell = _side_cell("variant", label, stage, left_is, right_is, t, stages[stage], 0.5)
                if previous is not None and stage != ADAPTIVE_STAGE:
                    into = (went_on & stages[previous]) | (arrived & stages[stage])
                    cell = _Cell(cell.statistic, label, stage, cell.wins, cell.losses, cell.neither, into, 0.5)
                cells.append(cell)
                # An adaptive comparison is out of all its matches: nobody advances into one (the pairs were chosen).
                previous = stage

    # Per model and per condition: share of decided matches won (null 1/k for k levels).
    for attr, left, right in (
        ("model", t.left_model, t.right_model),
        ("condition", t.left_condition, t.right_condition),
    ):
        levels = _levels(left, right)
        if len(levels) < 2:
            continue
        nobody = np.full(t.n_rows, None, dtype=object)
        winner = np.where(t.left_won, left, np.where(t.right_won, right, nobody))
        for level in levels:
            for stage, rows in stages.items():
                cells.append(
                    _share_cell(f"{attr}_share", level, stage, np.asarray(winner == level), t, rows, 1.0 / len(levels))
                )

    # Cross-model head-to-head: only matches between two different models.
    for a, b in combinations(_levels(t.left_model, t.right_model), 2):
        pair = np.asarray(
            ((t.left_model == a) & (t.right_model == b)) | ((t.left_model == b) & (t.right_model == a)), dtype=np.bool_
        )
        if not pair.any():
            continue
        for stage, rows in stages.items():
            cells.append(
                _side_cell(
                    "head_to_head",
                    f"{a} vs {b}",
                    stage,
                    np.asarray(t.left_model == a, dtype=np.bool_),
                    np.asarray(t.right_model == a, dtype=np.bool_),
                    t,
                    rows & pair,
                    0.5,
                )
            )

    # Personalised vs generic on mixed-condition matches, per bracket pair and per round.
    if not has_conditions(t):
        return cells + _position_cells(t, stages)
    left_p = np.asarray(t.left_condition == persona, dtype=np.bool_)
    right_p = np.asarray(t.right_condition == persona, dtype=np.bool_)
    mixed = np.asarray(
        (left_p & (t.right_condition == generic)) | (right_p & (t.left_condition == generic)), dtype=np.bool_
    )
    for pair_label in bracket_pair_order(t):
        rows = mixed & np.asarray(t.bracket_pair == pair_label, dtype=np.bool_)
        cells.append(
            _side_cell("personalized_vs_generic", f"bracket {pair_label}", pair_label, left_p, right_p, t, rows, 0.5)
        )
    for stage, rows in stages.items():
        cells.append(
            _side_cell("personalized_vs_generic", "all brackets", stage, left_p, right_p, t, rows & mixed, 0.5)
        )

    return cells + _position_cells(t, stages)


def _position_cells(t: PreparedTable, stages: dict[str, BoolArray]) -> list[_Cell]:
    """Position bias: the left side, among the matches whose placement was recorded (none: n = 0, undefined)."""
    placed = placement_recorded(t)
    true = np.ones(t.n_rows, dtype=np.bool_)
    return [_side_cell("position", "left", stage, true, ~true, t, rows & placed, 0.5) for stage, rows in stages.items()]


def _neither_cells(t: PreparedTable) -> list[tuple[str, str, BoolArray]]:
    out: list[tuple[str, str, BoolArray]] = []
    for stage, rows in _stage_masks(t).items():
        out.append(("all brackets", stage, rows))
    for pair_label in bracket_pair_order(t):
        out.append((f"bracket {pair_label}", pair_label, np.asarray(t.bracket_pair == pair_label, dtype=np.bool_)))
    return out


def win_rates(
    t: PreparedTable,
    *,
    resampler: ClusterResampler,
    confidence_level: float = 0.95,
    persona: str = "persona",
    generic: str = "generic",
    cells: Sequence[_Cell] | None = None,
    method: str = BOOTSTRAP,
    multiplicity: str = HOLM,
) -> WinRateTable:
    """Compute every cell of ``build_cells`` and the "neither" rates in one vectorised pass.

    ``method`` is the interval/p-value method (``bootstrap_ratios``): the clustered bootstrap or CR2-t.
    ``multiplicity`` adjusts the p-values within each statistic's family (``adjust_p_values``)."""
    cell_list = list(cells) if cells is not None else build_cells(t, persona=persona, generic=generic)
    neither_specs = _neither_cells(t)
    k = len(cell_list)
    a = t.n_annotators
    num = np.zeros((a, 2 * k + len(neither_specs)), dtype=np.float64)
    den = np.zeros_like(num)
    null = np.full(num.shape[1], np.nan)
    for i, c in enumerate(cell_list):
        num[:, i] = t.per_annotator(c.wins)
        den[:, i] = num[:, i] + t.per_annotator(c.losses)
        null[i] = c.null
        # Second block: the descriptive rate wins / n, interval only.
        num[:, k + i] = num[:, i]
        den[:, k + i] = t.per_annotator(c.n)
    for j, (_, _, rows) in enumerate(neither_specs):
        num[:, 2 * k + j] = t.per_annotator(rows & t.neither)
        den[:, 2 * k + j] = t.per_annotator(rows)
    boot = bootstrap_ratios(num, den, resampler=resampler, null=null, confidence_level=confidence_level, method=method)

    present = (den > 0).sum(axis=0)
    rows_out: list[WinRate] = []
    for i, c in enumerate(cell_list):
        n_total = float(c.n.sum())
        rows_out.append(
            WinRate(
                statistic=c.statistic,
                group=c.group,
                stage=c.stage,
                wins=int(c.wins.sum()),
                losses=int(c.losses.sum()),
                neither=int(c.neither.sum()),
                n=int(n_total),
                rate=float(c.wins.sum() / n_total) if n_total > 0 else float("nan"),
                decided_rate=float(boot.estimate[i]),
                ci_low=float(boot.ci_low[i]),
                ci_high=float(boot.ci_high[i]),
                p_value=float(boot.p_value[i]),
                null=float(c.null),
                rate_ci_low=float(boot.ci_low[k + i]),
                rate_ci_high=float(boot.ci_high[k + i]),
                n_annotators=int(present[i]),
                n_valid_resamples=int(boot.n_valid[i]),
            )
        )
    neither_out: list[Proportion] = []
    for j, (group, stage, rows) in enumerate(neither_specs):
        col = 2 * k + j
        neither_out.append(
            Proportion(
                statistic="neither",
                group=group,
                stage=stage,
                count=int((rows & t.neither).sum()),
                n=int(rows.sum()),
                estimate=float(boot.estimate[col]),
                ci_low=float(boot.ci_low[col]),
                ci_high=float(boot.ci_high[col]),
                n_annotators=int(present[col]),
                n_valid_resamples=int(boot.n_valid[col]),
            )
        )
    rows_out, families = _adjusted(rows_out, multiplicity)
    return WinRateTable(
        families=families,
        rows=tuple(rows_out),
        neither=tuple(neither_out),
        n_resamples=resampler.n_resamples,
        seed=resampler.seed,
        confidence_level=confidence_level,
        method=boot.method,
    )


FAMILY_DESCRIPTIONS = {
    "system": "win rates of the systems (a table without conditions), every system and stage",
    "variant": "win rates of the variants, every variant and stage",
    "model_share": "shares of decided matches won per model, every model and stage",
    "condition_share": "shares of decided matches won per condition, every condition and stage",
    "head_to_head": "cross-model head-to-head rates, every pair of models and stage",
    "personalized_vs_generic": "personalised vs generic, every bracket pair and stage",
    "position": "position bias, every stage",
}


def _adjusted(rows: list[WinRate], multiplicity: str) -> tuple[list[WinRate], tuple[PValueFamily, ...]]:
    """The rows with ``p_adjusted`` filled, one family per statistic (the stage "all" included: Holm holds
    whatever the tests' dependence), and the families in order of first appearance."""
    by_statistic: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_statistic.setdefault(r.statistic, []).append(i)
    out = list(rows)
    families = []
    for statistic, members in by_statistic.items():
        family = p_value_family(
            name=f"win rates: {statistic}",
            description=FAMILY_DESCRIPTIONS.get(statistic, statistic),
            labels=[f"{rows[i].group} ({rows[i].stage})" for i in members],
            p_values=[rows[i].p_value for i in members],
            method=multiplicity,
        )
        for i, adjusted in zip(members, family.p_adjusted, strict=True):
            out[i] = replace(rows[i], p_adjusted=adjusted)
        families.append(family)
    return out, tuple(families)
