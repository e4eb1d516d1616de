"""The comparison table contract (one row per match) and its preparation for the statistics.

``docs/comparison-table.md`` is the prose version of this module; keep them in step.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from analysis.stats.errors import AnalysisError, InsufficientDataError


def _sides(*fields: str) -> tuple[str, ...]:
    """left_<field> and right_<field> for each field, in that order: both sides carry the same columns."""
    return tuple(f"{side}_{name}" for name in fields for side in ("left", "right"))


IDENTITY_COLUMNS: tuple[str, ...] = (
    "study",
    "annotator",
    "query_id",
    "query_index",
    "bracket_id",
    "match",
    "round",
    "stage",
    "bracket_pair",
)
SIDE_COLUMNS: tuple[str, ...] = _sides("candidate", "position", "system", "model", "condition")
OUTCOME_COLUMNS: tuple[str, ...] = (
    "choice",
    "winner_side",
    "winner_system",
    "winner_model",
    "winner_condition",
)
TIMING_COLUMNS: tuple[str, ...] = ("shown_at", "answered_at", "seconds_on_page")
CHOICE_DETAIL_COLUMNS: tuple[str, ...] = (
    "advanced_side",
    "tie_automatic",
    "identical",
    "similarity",
    "comment",
    "question_comment",
)
"""Optional: the side that moved on (a tie's coin), whether a tie was recorded without asking, the pair's
likeness (``exact``/``near``/empty, and 0-100), the annotator's comments on the match and on the question."""
COLUMNS: tuple[str, ...] = IDENTITY_COLUMNS + SIDE_COLUMNS + OUTCOME_COLUMNS + TIMING_COLUMNS
"""Every fixed column, in the order exports write them; the optional ``CHOICE_DETAIL_COLUMNS`` and then the
metric columns follow."""

REQUIRED_COLUMNS: tuple[str, ...] = ("annotator", *_sides("system"), "choice")
"""What the statistics cannot do without; the rest is derived or optional (``with_design_defaults``)."""
DESIGN_COLUMNS: tuple[str, ...] = ("stage", "bracket_pair", *_sides("model", "condition"))
"""The tournament and persona/generic design: absent in judgments from outside (``analysis.importers``)."""

CHOICES: tuple[str, ...] = ("left", "right", "neither", "tie")
"""``tie`` ("both equally good") is neither side's win: like "neither" it is left out of every decided
statistic (decided win rates, regression, Bradley-Terry) and counted on its own (``n_tie``)."""
FINAL_STAGE = "final"
ADAPTIVE_STAGE = "adaptive"
"""The one stage of an adaptive design's comparisons: each pair chosen from the judgments before it, none a round
of a bracket (docs/comparison-table.md, "Stages")."""
STAGES: tuple[str, ...] = ("round1", FINAL_STAGE)
"""The stages of the default 4-system bracket; any ``round<k>`` (k >= 1), ``final`` and ``adaptive`` are valid."""
BRACKET_PAIRS: tuple[str, ...] = ("AB", "CD", "final")
"""The bracket pairs of the default 4-system bracket; larger brackets add ``EF``, ``ABCD``, ..."""
_STAGE_RE = re.compile(r"round([1-9][0-9]*)|final|adaptive")
STAGE_WORDS = "round1, round2, ..., final or adaptive"

BRACKET_DESIGN = "bracket"
ADAPTIVE_DESIGN = "adaptive"
MIXED_DESIGN = "mixed"
"""What produced a table's pairs (``design_of``): brackets, the adaptive design, or both."""


def is_stage(value: object) -> bool:
    """``final``, ``round<k>`` with k >= 1 (``round1``, ``round2``, ...) or ``adaptive``."""
    return isinstance(value, str) and _STAGE_RE.fullmatch(value) is not None


def stage_key(stage: str) -> tuple[int, int]:
    """Sort key: ``round1 < round2 < ... < final < adaptive``."""
    found = _STAGE_RE.fullmatch(stage)
    if found is None:
        raise AnalysisError(f"unknown stage {stage!r} (expected {STAGE_WORDS})")
    if stage == ADAPTIVE_STAGE:
        return (2, 0)
    return (1, 0) if found.group(1) is None else (0, int(found.group(1)))


def design_of(stages: Iterable[object]) -> str | None:
    """The design a table's stages say produced it: ``bracket`` (rounds and finals), ``adaptive`` or ``mixed``;
    None without any stage."""
    found = {str(s) for s in stages if s is not None}
    if not found:
        return None
    adaptive = ADAPTIVE_STAGE in found
    if not adaptive:
        return BRACKET_DESIGN
    return ADAPTIVE_DESIGN if found == {ADAPTIVE_STAGE} else MIXED_DESIGN


def stage_order(stages: Iterable[object]) -> tuple[str, ...]:
    """The distinct stages among ``stages`` (missing values ignored), first round first, final last."""
    return tuple(sorted({str(s) for s in stages if s is not None}, key=stage_key))


def stage_name(round_number: int, total_rounds: int) -> str:
    """The stage of a bracket round: the last round is ``final``, the others ``round<k>``.

    A bracket of ``n = 2**total_rounds`` systems has ``round1 .. round<total_rounds - 1>`` and ``final``:
    2 systems only a final, 4 ``round1, final``, 8 ``round1, round2, final``, 16 up to ``round3``.
    """
    if not 1 <= round_number <= total_rounds:
        raise AnalysisError(f"round {round_number} is outside a bracket of {total_rounds} rounds")
    return FINAL_STAGE if round_number == total_rounds else f"round{round_number}"


AUTOMATIC_COLUMN = "tie_automatic"
ADVANCED_COLUMN = "advanced_side"
"""Optional: the side that went on to the next round (the winner, or a tie's coin); a later stage's per-variant
denominator counts the ties it names (docs/analysis.md)."""
BRACKET_COLUMN = "bracket_id"
"""Optional: the bracket a row's match belongs to; a later stage's per-variant denominator uses it to count the
systems that arrived by a bye."""
PLACEMENT_COLUMN = "placement_recorded"
"""Optional bool column: False where the left/right placement the annotator saw was not recorded (the
paper's legacy export). Position-bias statistics use only rows where it is true (or the column is absent)."""
LEFT_PREFIX = "left__"
RIGHT_PREFIX = "right__"

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def metric_names(table: pd.DataFrame) -> tuple[str, ...]:
    """Metrics with both a ``left__<metric>`` and a ``right__<metric>`` column, in table order."""
    cols = set(map(str, table.columns))
    return tuple(
        str(c)[len(LEFT_PREFIX) :]
        for c in table.columns
        if str(c).startswith(LEFT_PREFIX) and RIGHT_PREFIX + str(c)[len(LEFT_PREFIX) :] in cols
    )


def first_appearances(codes: npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.int64]:
    """Positions of each code's first appearance, for codes numbered in order of first appearance (what
    ``pd.factorize`` gives; the sentinel -1 never counts): one pass, no sort."""
    codes = np.asarray(codes)
    if codes.size == 0:
        return np.zeros(0, dtype=np.int64)
    seen = np.maximum.accumulate(codes)
    new = np.empty(codes.shape[0], dtype=np.bool_)
    new[0] = codes[0] >= 0
    np.greater(codes[1:], seen[:-1], out=new[1:])
    return np.flatnonzero(new).astype(np.int64)


def _as_str(values: Any) -> npt.NDArray[np.object_]:
    """Text values as a numpy object array of ``str``, missing values as ``None``.

    Built from the distinct values (``pd.factorize``), so equal values are one ``str`` object: a column of
    a million rows with a few labels costs its 8 MB of pointers, not a million new strings."""
    series = pd.Series(values, copy=False).astype("string")
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    labels = np.empty(len(uniques) + 1, dtype=object)
    labels[: len(uniques)] = list(np.asarray(uniques, dtype=object))
    labels[-1] = None
    return np.asarray(labels[codes], dtype=object)


@dataclass(frozen=True)
class PreparedTable:
    """Validated, integer-coded arrays of a comparison table, shared by every statistic."""

    frame: pd.DataFrame
    annotators: tuple[str, ...]
    annotator_code: IntArray
    stage: npt.NDArray[np.object_]
    bracket_pair: npt.NDArray[np.object_]
    choice: npt.NDArray[np.object_]
    left_system: npt.NDArray[np.object_]
    right_system: npt.NDArray[np.object_]
    left_model: npt.NDArray[np.object_]
    right_model: npt.NDArray[np.object_]
    left_condition: npt.NDArray[np.object_]
    right_condition: npt.NDArray[np.object_]
    left_won: BoolArray
    right_won: BoolArray
    neither: BoolArray
    tie: BoolArray

    @property
    def n_rows(self) -> int:
        return int(self.annotator_code.shape[0])

    @property
    def n_annotators(self) -> int:
        return len(self.annotators)

    @property
    def decided(self) -> BoolArray:
        return self.left_won | self.right_won

    def per_annotator(self, values: npt.ArrayLike) -> FloatArray:
        """Sum a per-row vector within each annotator (length ``n_annotators``)."""
        weights = np.asarray(values, dtype=np.float64)
        return np.bincount(self.annotator_code, weights=weights, minlength=self.n_annotators).astype(np.float64)


def with_design_defaults(table: pd.DataFrame) -> pd.DataFrame:
    """A table without the design columns analysed as one stage of pairs of systems: ``stage`` and
    ``bracket_pair`` absent read as ``final`` (one stage), a model absent is the system, a condition absent
    is none (the persona/generic statistics and the regression do not apply: ``has_conditions``)."""
    absent = [c for c in DESIGN_COLUMNS if c not in table.columns]
    if not absent:
        return table
    out = table.copy()
    for column in absent:
        side = column.partition("_")[0]
        if column in ("stage", "bracket_pair"):
            out[column] = FINAL_STAGE
        elif column.endswith("_model") and f"{side}_system" in out.columns:
            out[column] = out[f"{side}_system"]
        else:
            out[column] = None
    return out


def has_conditions(t: PreparedTable) -> bool:
    """Whether any side has a condition (persona/generic): a table of outside judgments has none."""
    return any(c is not None for c in t.left_condition) or any(c is not None for c in t.right_condition)


def prepare_table(table: pd.DataFrame) -> PreparedTable:
    """Check a comparison table against the contract and code it for the statistics.

    Raises ``AnalysisError`` naming the offending columns or values; an empty table
    raises ``InsufficientDataError``.
    """
    if not isinstance(table, pd.DataFrame):
        raise AnalysisError(f"expected a pandas DataFrame, got {type(table).__name__}")
    missing = [c for c in REQUIRED_COLUMNS if c not in table.columns]
    if missing:
        raise AnalysisError(
            f"comparison table is missing required columns: {', '.join(missing)}", extra={"missing": missing}
        )
    if len(table) == 0:
        raise InsufficientDataError("comparison table has no rows")
    frame = with_design_defaults(table).reset_index(drop=True)

    choice = _as_str(frame["choice"])
    bad = sorted({str(c) for c in choice if c not in CHOICES})
    if bad:
        raise AnalysisError(
            f"unknown choice values: {', '.join(bad)} (expected left, right, neither or tie)", extra={"values": bad}
        )
    stage = _as_str(frame["stage"])
    bad = sorted({str(s) for s in stage if not is_stage(s)})
    if bad:
        raise AnalysisError(f"unknown stage values: {', '.join(bad)} (expected {STAGE_WORDS})", extra={"values": bad})
    annot = _as_str(frame["annotator"])
    if any(a is None for a in annot):
        raise AnalysisError("annotator is empty on some rows")
    labels, codes = np.unique(annot.astype(str), return_inverse=True)
    if "winner_side" in frame.columns:
        side = _as_str(frame["winner_side"])
        expected = np.asarray([c if c in ("left", "right") else None for c in choice], dtype=object)
        if not np.array_equal(side.astype(str), expected.astype(str)):
            raise AnalysisError("winner_side disagrees with choice on some rows")

    prepared = PreparedTable(
        frame=frame,
        annotators=tuple(str(x) for x in labels),
        annotator_code=codes.astype(np.int64).reshape(-1),
        stage=stage,
        bracket_pair=_as_str(frame["bracket_pair"]),
        choice=choice,
        left_system=_as_str(frame["left_system"]),
        right_system=_as_str(frame["right_system"]),
        left_model=_as_str(frame["left_model"]),
        right_model=_as_str(frame["right_model"]),
        left_condition=_as_str(frame["left_condition"]),
        right_condition=_as_str(frame["right_condition"]),
        left_won=np.asarray(choice == "left", dtype=np.bool_),
        right_won=np.asarray(choice == "right", dtype=np.bool_),
        neither=np.asarray(choice == "neither", dtype=np.bool_),
        tie=np.asarray(choice == "tie", dtype=np.bool_),
    )
    return prepared


def recorded_without_asking(t: PreparedTable) -> BoolArray:
    """Rows whose choice the platform recorded without asking the annotator (``tie_automatic``: a tie between
    identical summaries under the study's identical policy "tie"); none when the table has no such column."""
    if AUTOMATIC_COLUMN not in t.frame.columns:
        return np.zeros(t.n_rows, dtype=np.bool_)
    values = t.frame[AUTOMATIC_COLUMN]
    if pd.api.types.is_bool_dtype(values.dtype) and not values.hasnans:
        return np.asarray(values.to_numpy(dtype=np.bool_), dtype=np.bool_)
    as_text = values.astype("string").str.strip().str.lower()
    return np.asarray(as_text.isin(["true", "1", "1.0"]).fillna(False).to_numpy(dtype=bool), dtype=np.bool_)


def placement_recorded(t: PreparedTable) -> BoolArray:
    """Rows whose left/right placement was recorded (all rows when the table has no ``placement_recorded``)."""
    if PLACEMENT_COLUMN not in t.frame.columns:
        return np.ones(t.n_rows, dtype=np.bool_)
    values = t.frame[PLACEMENT_COLUMN]
    as_text = values.astype("string").str.strip().str.lower()
    return np.asarray(~as_text.isin(["false", "0", "0.0"]).fillna(False).to_numpy(dtype=bool), dtype=np.bool_)


def with_derived_columns(table: pd.DataFrame) -> pd.DataFrame:
    """Fill the derivable contract columns (``winner_*``, ``round``, ``seconds_on_page``) when absent."""
    out = table.copy()
    choice = out["choice"].astype(object)
    if "winner_side" not in out.columns:
        out["winner_side"] = choice.where(choice.isin(["left", "right"]), None)
    for attr in ("system", "model", "condition"):
        col = f"winner_{attr}"
        if col not in out.columns and f"left_{attr}" in out.columns:
            out[col] = np.where(
                choice == "left", out[f"left_{attr}"], np.where(choice == "right", out[f"right_{attr}"], None)
            )
    if "round" not in out.columns and "stage" in out.columns:
        # round<k> is round k; the final comes after the table's last numbered round (2 for round1/final).
        stages = out["stage"].astype(object)
        # An adaptive comparison has no round a stage could say (its place in the question is its `match` label).
        numbered = [stage_key(str(s))[1] for s in stage_order(stages) if s not in (FINAL_STAGE, ADAPTIVE_STAGE)]
        final_round = max(numbered, default=0) + 1
        out["round"] = [
            final_round if s == FINAL_STAGE else stage_key(str(s))[1] if is_stage(s) and s != ADAPTIVE_STAGE else None
            for s in stages
        ]
    if "seconds_on_page" not in out.columns and {"shown_at", "answered_at"} <= set(out.columns):
        delta = pd.to_datetime(out["answered_at"], utc=True) - pd.to_datetime(out["shown_at"], utc=True)
        out["seconds_on_page"] = delta.dt.total_seconds()
    return out


ROW_KEY: tuple[str, ...] = ("annotator", "query_id", "match")
"""What makes a row one match: the participation's code, the question and the match (its label or id)."""
MAX_ROW_PROBLEMS = 5
"""How many offending rows a refusal names before it counts the rest."""


def _row_name(frame: pd.DataFrame, i: int) -> str:
    """A row as a reader finds it again: its number among the data rows (1 = the first after the header) and
    its participation, question and match where the table has them."""
    parts = [f"{c} {frame[c].iat[i]}" for c in ROW_KEY if c in frame.columns]
    return f"row {i + 1}" + (f" ({', '.join(parts)})" if parts else "")


def _missing(values: pd.Series) -> npt.NDArray[np.bool_]:
    text = values.astype("string")
    return np.asarray((text.isna() | (text.str.strip() == "")).to_numpy(dtype=bool, na_value=True), dtype=np.bool_)


def _not_stage(values: pd.Series) -> npt.NDArray[np.bool_]:
    """Rows whose stage is not ``round<k>`` or ``final``, testing each distinct value once."""
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    bad = np.asarray([not is_stage(u) for u in uniques] + [True], dtype=np.bool_)
    return np.asarray(bad[codes], dtype=np.bool_)


def check_rows(table: pd.DataFrame, *, conditions: Iterable[str]) -> None:
    """Refuse a comparison table from outside the platform (file mode) whose rows could not have been recorded,
    naming each offending row and field: a condition outside ``conditions`` (the analysis's persona and generic
    names: ``Persona`` is not ``persona``), a side without its system, model or condition, a system or a summary
    meeting itself, an unknown choice or stage, a ``winner_side``/``winner_system`` disagreeing with the choice,
    a negative time on page, and the same match twice (``ROW_KEY``). Raises ``AnalysisError`` with the first
    ``MAX_ROW_PROBLEMS`` problems and a count of the rest; the table's columns are checked by ``prepare_table``."""
    missing = [c for c in REQUIRED_COLUMNS if c not in table.columns]
    if missing:
        raise AnalysisError(
            f"comparison table is missing required columns: {', '.join(missing)}", extra={"missing": missing}
        )
    without_conditions = not any(f"{side}_condition" in table.columns for side in ("left", "right"))
    frame = with_design_defaults(table).reset_index(drop=True)
    allowed = tuple(dict.fromkeys(conditions))
    n = len(frame)
    problems: list[tuple[int, str]] = []

    def flag(bad: npt.ArrayLike, describe: Callable[[int], str]) -> None:
        for i in np.flatnonzero(np.asarray(bad, dtype=np.bool_))[: MAX_ROW_PROBLEMS + 1]:
            problems.append((int(i), describe(int(i))))
        count = int(np.asarray(bad, dtype=np.bool_).sum())
        if count > MAX_ROW_PROBLEMS + 1:
            # Count the rest without naming them (a table of a million bad rows is refused in one line).
            problems.extend((n + k, "") for k in range(count - MAX_ROW_PROBLEMS - 1))

    for side in ("left", "right"):
        for field in ("system", "model") if without_conditions else ("system", "model", "condition"):
            col = f"{side}_{field}"

            def empty(i: int, col: str = col) -> str:
                return f"{col} is empty"

            flag(_missing(frame[col]), empty)
        col = f"{side}_condition"
        if without_conditions:
            continue
        values = frame[col].astype("string")
        outside = np.asarray((~values.isin(allowed) & ~pd.Series(_missing(frame[col]))).to_numpy(dtype=bool))

        def unknown(i: int, col: str = col) -> str:
            return (
                f"{col} {frame[col].iat[i]!r} is not a condition of this analysis "
                f"(expected {' or '.join(allowed)}; set persona_condition/generic_condition for other names)"
            )

        flag(outside, unknown)
    for field in ("system", "candidate"):
        left, right = f"left_{field}", f"right_{field}"
        if left in frame.columns and right in frame.columns:
            same = frame[left].astype("string").eq(frame[right].astype("string")).fillna(False)

            def itself(i: int, left: str = left, right: str = right) -> str:
                return f"{left} and {right} are the same ({frame[left].iat[i]})"

            flag(same.to_numpy(dtype=bool), itself)
    choice = frame["choice"].astype("string")
    flag(
        (~choice.isin(CHOICES)).fillna(True).to_numpy(dtype=bool),
        lambda i: f"choice {frame['choice'].iat[i]!r} is not left, right, neither or tie",
    )
    stage = frame["stage"]
    flag(
        _not_stage(stage),
        lambda i: f"stage {stage.iat[i]!r} is not {STAGE_WORDS}",
    )
    decided = choice.isin(["left", "right"]).fillna(False).to_numpy(dtype=bool)
    if "winner_side" in frame.columns:
        side = frame["winner_side"].astype("string")
        expected = choice.where(choice.isin(["left", "right"]))
        disagree = ~(side.eq(expected).fillna(False) | (side.isna() & expected.isna()))
        flag(
            disagree.to_numpy(dtype=bool),
            lambda i: f"winner_side {frame['winner_side'].iat[i]!r} disagrees with choice {frame['choice'].iat[i]!r}",
        )
    if "winner_system" in frame.columns:
        winner = frame["winner_system"].astype("string")
        chosen = np.where(
            choice.eq("left").fillna(False),
            frame["left_system"].astype("string"),
            np.where(choice.eq("right").fillna(False), frame["right_system"].astype("string"), pd.NA),
        )
        chosen_series = pd.Series(chosen, dtype="string")
        disagree = np.where(decided, ~winner.eq(chosen_series).fillna(False), winner.notna())
        flag(
            disagree,
            lambda i: (
                f"winner_system {frame['winner_system'].iat[i]!r} is not the chosen side's system "
                f"(choice {frame['choice'].iat[i]!r})"
            ),
        )
    if "seconds_on_page" in frame.columns:
        seconds = pd.to_numeric(frame["seconds_on_page"], errors="coerce")
        flag(
            (seconds < 0).fillna(False).to_numpy(dtype=bool), lambda i: f"seconds_on_page {seconds.iat[i]} is negative"
        )
    if all(c in frame.columns for c in ROW_KEY):
        key = frame[list(ROW_KEY)].astype("string")
        again = key.duplicated(keep="first").to_numpy(dtype=bool)
        first = pd.Series(np.arange(n), index=frame.index).groupby([key[c] for c in ROW_KEY], dropna=False)
        first_row = first.transform("first").to_numpy()
        flag(
            again,
            lambda i: (
                f"the same match as row {int(first_row[i]) + 1} (same {', '.join(ROW_KEY)}): a match is answered once"
            ),
        )
    if not problems:
        return
    named = sorted((p for p in problems if p[1]), key=lambda p: p[0])[:MAX_ROW_PROBLEMS]
    rest = len(problems) - len(named)
    lines = "; ".join(f"{_row_name(frame, i)}: {text}" for i, text in named)
    more = f"; and {rest} more problem{'s' if rest != 1 else ''}" if rest else ""
    raise AnalysisError(
        f"{len(problems)} problem{'s' if len(problems) != 1 else ''} in the comparison table: {lines}{more}",
        extra={"rows": [i + 1 for i, _ in named]},
    )
