"""Outside judgments (pairwise, best-worst, ranking) converted to the comparison table, contradictions flagged.

Plain Python and pandas, no Django: ``import_judgments(path, kind=...)`` in a notebook, or
``python -m analysis.cli import-judgments`` / ``manage.py import_judgments`` (docs/analysis.md, "Importing
outside judgments"). Every judgment keeps its annotator id, the cluster of every clustered statistic.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.stats._results import ResultMixin

PAIRWISE = "pairwise"
BEST_WORST = "best-worst"
RANKING = "ranking"
KINDS: tuple[str, ...] = (PAIRWISE, BEST_WORST, RANKING)

DEFAULT_COLUMNS: Mapping[str, Mapping[str, str]] = {
    PAIRWISE: {
        "item": "item",
        "annotator": "annotator",
        "system_a": "system_a",
        "system_b": "system_b",
        "choice": "choice",
    },
    BEST_WORST: {"item": "item", "annotator": "annotator", "systems": "systems", "best": "best", "worst": "worst"},
    RANKING: {"item": "item", "annotator": "annotator", "ranking": "ranking"},
}
"""The fields of each kind and the file column each is read from by default (``columns`` overrides them)."""

PAIR_CHOICES = {"a": "left", "b": "right", "tie": "tie"}
_LIST_SEPARATORS = re.compile(r"\s*[|;,]\s*")
_RANK_LEVELS = re.compile(r"\s*>\s*")
_RANK_TIES = re.compile(r"\s*=\s*")


class ImportProblem(ValueError):
    """A file the importer refuses; the message names the file, rows and fields."""


@dataclass(frozen=True)
class RowProblem(ResultMixin):
    """One refused judgment: its data row (1 = the first after a CSV header, or the first JSONL line), the
    field, and what is wrong. ``contradiction`` marks a judgment that contradicts itself (``--drop-contradictions``
    can leave it out); the others are malformed and always refuse the file."""

    row: int
    field: str
    problem: str
    contradiction: bool

    def sentence(self) -> str:
        return f"row {self.row}, {self.field}: {self.problem}"


@dataclass(frozen=True)
class ImportedJudgments(ResultMixin):
    """The comparison table of a judgments file, and what the conversion did."""

    table: pd.DataFrame = field(repr=False)
    kind: str
    source: str
    n_judgments: int
    n_pairs: int
    dropped: tuple[RowProblem, ...]

    def manifest_entry(self) -> dict[str, Any]:
        """What the export manifest records under ``import``."""
        return {
            "kind": self.kind,
            "source": self.source,
            "rule": RULES[self.kind],
            "judgments": self.n_judgments,
            "pairs": self.n_pairs,
            "dropped": [p.to_dict() for p in self.dropped],
        }


RULES: Mapping[str, str] = {
    PAIRWISE: "one row per judgment: system_a on the left, system_b on the right; a -> left, b -> right, tie -> tie",
    BEST_WORST: "best-worst scaling (Louviere, Flynn and Marley 2015): the best system beats every other system "
    "shown, and every other system beats the worst; k systems give 2k - 3 pairs",
    RANKING: "every pair of systems at different ranks: the higher rank wins; systems tied at one rank are a tie",
}


def parse_columns(text: str | None, kind: str) -> dict[str, str]:
    """``best=Best,worst=Worst`` over the kind's defaults; an unknown field is refused by name."""
    columns = dict(DEFAULT_COLUMNS[kind])
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        name, sep, column = part.partition("=")
        if not sep or not column.strip():
            raise ImportProblem(f"--columns: {part!r} is not field=column")
        if name.strip() not in columns:
            raise ImportProblem(
                f"--columns: {name.strip()!r} is not a field of {kind} judgments (fields: {', '.join(columns)})"
            )
        columns[name.strip()] = column.strip()
    return columns


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The records of a .csv or .jsonl file, all values as read (text from a CSV, JSON values from JSONL)."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        try:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            raise ImportProblem(f"{path}: cannot read as CSV ({exc})") from exc
        return [dict(r) for r in frame.to_dict(orient="records")]
    if suffix in (".jsonl", ".ndjson"):
        rows: list[dict[str, Any]] = []
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ImportProblem(f"{path}: cannot read ({exc})") from exc
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ImportProblem(f"{path}: line {number} is not JSON ({exc.msg})") from exc
            if not isinstance(value, dict):
                raise ImportProblem(f"{path}: line {number} is not a JSON object")
            rows.append(value)
        return rows
    raise ImportProblem(f"{path}: unknown file type {path.suffix!r} (expected .csv or .jsonl)")


def _text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and value != value):
        return None
    text = str(value).strip()
    return text or None


def _system_list(value: Any) -> list[str]:
    if isinstance(value, list):
        return [t for t in (_text(v) for v in value) if t]
    text = _text(value)
    return [s for s in _LIST_SEPARATORS.split(text) if s] if text else []


def _rank_levels(value: Any) -> list[list[str]]:
    """``A > B = C > D`` or a JSON list whose items are systems or lists of tied systems, best first."""
    if isinstance(value, list):
        return [
            [t for t in (_text(v) for v in (level if isinstance(level, list) else [level])) if t] for level in value
        ]
    text = _text(value)
    if not text:
        return []
    if ">" not in text and "=" not in text:
        return [[s] for s in _LIST_SEPARATORS.split(text) if s]
    return [[s for s in _RANK_TIES.split(level) if s] for level in _RANK_LEVELS.split(text)]


Pair = tuple[str, str, str]
"""(left system, right system, choice)."""


def pairs_from_best_worst(shown: Sequence[str], best: str, worst: str) -> list[Pair]:
    """The best beats every other system shown; every other system beats the worst (best vs worst once)."""
    pairs: list[Pair] = [(best, s, "left") for s in shown if s != best]
    pairs += [(s, worst, "left") for s in shown if s not in (best, worst)]
    return pairs


def pairs_from_ranking(levels: Sequence[Sequence[str]]) -> list[Pair]:
    """Every pair of systems: the higher rank on the left and winning, a tie within one rank."""
    pairs: list[Pair] = []
    for i, level in enumerate(levels):
        pairs += [(a, b, "tie") for a, b in combinations(level, 2)]
        for lower in levels[i + 1 :]:
            pairs += [(a, b, "left") for a in level for b in lower]
    return pairs


def _judgment(
    kind: str, record: Mapping[str, Any], columns: Mapping[str, str], row: int
) -> tuple[list[Pair], list[RowProblem]]:
    """The pairs of one judgment, or its problems."""
    problems: list[RowProblem] = []

    def bad(name: str, text: str, contradiction: bool = False) -> None:
        problems.append(RowProblem(row, columns[name], text, contradiction))

    if kind == PAIRWISE:
        a, b = _text(record.get(columns["system_a"])), _text(record.get(columns["system_b"]))
        choice = (_text(record.get(columns["choice"])) or "").lower()
        for name, value in (("system_a", a), ("system_b", b)):
            if value is None:
                bad(name, "is empty")
        if choice not in PAIR_CHOICES:
            bad("choice", f"{record.get(columns['choice'])!r} is not a, b or tie")
        if a is not None and a == b:
            bad("system_b", f"the pair is {a!r} with itself", contradiction=True)
        return ([] if problems else [(str(a), str(b), PAIR_CHOICES[choice])]), problems
    if kind == BEST_WORST:
        shown = _system_list(record.get(columns["systems"]))
        best, worst = _text(record.get(columns["best"])), _text(record.get(columns["worst"]))
        if len(shown) < 2:
            bad("systems", f"names {len(shown)} system{'s' if len(shown) != 1 else ''}; a judgment needs 2 or more")
        if len(set(shown)) != len(shown):
            twice = sorted({s for s in shown if shown.count(s) > 1})
            bad("systems", f"lists {', '.join(twice)} twice", contradiction=True)
        for name, value in (("best", best), ("worst", worst)):
            if value is None:
                bad(name, "is empty")
            elif shown and value not in shown:
                bad(name, f"{value!r} is not among the systems shown ({', '.join(shown)})")
        if best is not None and best == worst:
            bad("worst", f"{best!r} is both best and worst", contradiction=True)
        return ([] if problems else pairs_from_best_worst(shown, str(best), str(worst))), problems
    levels = _rank_levels(record.get(columns["ranking"]))
    flat = [s for level in levels for s in level]
    if len(flat) < 2:
        bad("ranking", f"ranks {len(flat)} system{'s' if len(flat) != 1 else ''}; a ranking needs 2 or more")
    if len(set(flat)) != len(flat):
        twice = sorted({s for s in flat if flat.count(s) > 1})
        bad("ranking", f"lists {', '.join(twice)} twice", contradiction=True)
    return ([] if problems else pairs_from_ranking(levels)), problems


def judgments_table(
    records: Iterable[Mapping[str, Any]],
    *,
    kind: str,
    columns: Mapping[str, str] | None = None,
    drop_contradictions: bool = False,
    study: str = "imported",
    source: str = "",
) -> ImportedJudgments:
    """Convert judgment records to the comparison table (docs/comparison-table.md) by the kind's rule.

    Raises ``ImportProblem`` naming rows and fields for a missing column, a malformed judgment, or (unless
    ``drop_contradictions``) a judgment that contradicts itself; dropped ones are in ``dropped``."""
    if kind not in KINDS:
        raise ImportProblem(f"unknown kind {kind!r} (expected {', '.join(KINDS)})")
    cols = dict(DEFAULT_COLUMNS[kind]) | dict(columns or {})
    records = list(records)
    where = f"{source}: " if source else ""
    present = set().union(*(r.keys() for r in records)) if records else set()
    missing = [f"{name} (column {col!r})" for name, col in cols.items() if col not in present]
    if missing:
        raise ImportProblem(
            f"{where}missing fields: {', '.join(missing)}; name other columns with --columns field=column"
        )
    if not records:
        raise ImportProblem(f"{where}no judgments")
    rows: list[dict[str, Any]] = []
    problems: list[RowProblem] = []
    for number, record in enumerate(records, start=1):
        own: list[RowProblem] = []
        for name in ("item", "annotator"):
            if _text(record.get(cols[name])) is None:
                own.append(RowProblem(number, cols[name], "is empty", False))
        pairs, more = _judgment(kind, record, cols, number)
        own += more
        if own:
            problems += own
            continue
        item, annotator = str(_text(record[cols["item"]])), str(_text(record[cols["annotator"]]))
        for k, (left, right, choice) in enumerate(pairs, start=1):
            rows.append(
                {
                    "study": study,
                    "annotator": annotator,
                    "query_id": item,
                    "match": f"j{number}p{k}",
                    "left_system": left,
                    "right_system": right,
                    "choice": choice,
                    "placement_recorded": False,
                    "source_row": number,
                }
            )
    malformed = [p for p in problems if not p.contradiction]
    contradictions = [p for p in problems if p.contradiction]
    refused = malformed + ([] if drop_contradictions else contradictions)
    if refused:
        shown = "; ".join(p.sentence() for p in refused[:10])
        rest = f"; and {len(refused) - 10} more" if len(refused) > 10 else ""
        hint = (
            f" ({len(contradictions)} contradiction{'s' if len(contradictions) != 1 else ''}: "
            "--drop-contradictions keeps the other judgments)"
            if contradictions and not drop_contradictions and not malformed
            else ""
        )
        raise ImportProblem(f"{where}{len(refused)} problem{'s' if len(refused) != 1 else ''}: {shown}{rest}{hint}")
    if not rows:
        raise ImportProblem(f"{where}no judgments left after dropping {len(contradictions)} contradictions")
    dropped_rows = {p.row for p in contradictions}
    return ImportedJudgments(
        table=pd.DataFrame(rows),
        kind=kind,
        source=source,
        n_judgments=len(records) - len(dropped_rows),
        n_pairs=len(rows),
        dropped=tuple(contradictions),
    )


def import_judgments(
    path: Path,
    *,
    kind: str,
    columns: Mapping[str, str] | None = None,
    drop_contradictions: bool = False,
    study: str | None = None,
) -> ImportedJudgments:
    """Read a .csv or .jsonl judgments file and convert it (``judgments_table``)."""
    return judgments_table(
        read_rows(path),
        kind=kind,
        columns=columns,
        drop_contradictions=drop_contradictions,
        study=study or path.stem,
        source=str(path),
    )


__all__ = [
    "BEST_WORST",
    "KINDS",
    "PAIRWISE",
    "RANKING",
    "ImportProblem",
    "ImportedJudgments",
    "RowProblem",
    "import_judgments",
    "judgments_table",
    "pairs_from_best_worst",
    "pairs_from_ranking",
    "parse_columns",
]
