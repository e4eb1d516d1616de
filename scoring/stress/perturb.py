"""Perturbation tests: the catalogue of tests and the deterministic perturbations.

A perturbation turns each row's summary into an ordered sequence of levels (level 0 is the
original, except for incremental addition, which starts from the empty string); each level
holds one or more variant texts. LLM rewrites live in `scoring.stress.rewrite`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from kernel.text import split_sentences, tokenize
from scoring.stress.directions import Direction

__all__ = [
    "MEANING_PRESERVING",
    "PAPER_TESTS",
    "TESTS",
    "Perturbed",
    "StressError",
    "StressRow",
    "TestKind",
    "TestSpec",
    "Variant",
    "added_source_text",
    "distractor",
    "incremental",
    "source_sentences",
]


class StressError(ValueError):
    """Bad input to a stress test (unknown name, missing configuration, unusable rows)."""


class TestKind(StrEnum):
    DETERMINISTIC = "deterministic"
    LLM = "llm"
    LONG_DOCUMENT = "long-document"


@dataclass(frozen=True)
class TestSpec:
    """One stress test: its name, the direction a faithful metric moves, and how it is made."""

    name: str
    direction: Direction
    kind: TestKind
    group: str
    """"paper" for seed 002's five tests, "meaning-preserving" for seed 003's set, "long-document"."""
    description: str


_SPECS = (
    TestSpec("distractor", Direction.DECREASE, TestKind.DETERMINISTIC, "paper",
             "append 1..5 sentences sampled from other documents of the data set"),
    TestSpec("incremental", Direction.INCREASE, TestKind.DETERMINISTIC, "paper",
             "from the empty string, add the summary's sentences one at a time"),
    TestSpec("lengthen", Direction.STABLE, TestKind.LLM, "paper",
             "LLM expands the summary to 1.5x, 2x and 3x its length without new information"),
    TestSpec("shorten", Direction.STABLE, TestKind.LLM, "paper",
             "LLM condenses the summary to 0.8x, 0.6x and 0.4x its length keeping the content"),
    TestSpec("audience", Direction.DECREASE, TestKind.LLM, "paper",
             "LLM rewrites the summary for an undergraduate student, a journalist and a domain expert"),
    TestSpec("paraphrased", Direction.STABLE, TestKind.LLM, "meaning-preserving",
             "LLM rewords the summary with different syntax and wording"),
    TestSpec("simplified", Direction.STABLE, TestKind.LLM, "meaning-preserving",
             "LLM splits complex sentences into short, simple ones"),
    TestSpec("synonym_replaced", Direction.STABLE, TestKind.LLM, "meaning-preserving",
             "LLM replaces content words with synonyms"),
    TestSpec("less_diverse", Direction.STABLE, TestKind.LLM, "meaning-preserving",
             "LLM reduces lexical diversity by reusing the same words"),
    TestSpec("negated", Direction.STABLE, TestKind.LLM, "meaning-preserving",
             "LLM restates claims with logically equivalent negations"),
    TestSpec("summarised", Direction.STABLE, TestKind.LLM, "meaning-preserving",
             "LLM compresses the summary further"),
    TestSpec("added_source_text", Direction.STABLE, TestKind.DETERMINISTIC, "meaning-preserving",
             "append a real source sentence that the summary does not use"),
    TestSpec("long_document", Direction.STABLE, TestKind.LONG_DOCUMENT, "long-document",
             "retrieval window sweep w=0,1,2 and scores per claim-similarity bin (seed 003)"),
)  # fmt: skip

TESTS: Mapping[str, TestSpec] = {spec.name: spec for spec in _SPECS}
PAPER_TESTS = tuple(s.name for s in _SPECS if s.group == "paper")
MEANING_PRESERVING = tuple(s.name for s in _SPECS if s.group == "meaning-preserving")


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return " ".join(str(v).strip() for v in value if str(v).strip())
    return str(value)


@dataclass(frozen=True)
class StressRow:
    """One summary to perturb, with what the metrics may need beside it."""

    id: str
    summary: str
    source: str = ""
    reference: str = ""
    query: str = ""
    persona: str = ""
    source_sentences: tuple[str, ...] = ()
    """The source pre-split into sentences when the data set ships it so (SciTLDR); else split on demand."""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> StressRow:
        if "id" not in data or "summary" not in data:
            raise StressError(f"a row needs 'id' and 'summary' (got keys {sorted(data)})")
        raw_source = data.get("source")
        pre_split = tuple(str(s).strip() for s in raw_source if str(s).strip()) if isinstance(raw_source, list) else ()
        return cls(
            id=str(data["id"]),
            summary=_text(data["summary"]),
            source=_text(raw_source),
            reference=_text(data.get("reference")),
            query=_text(data.get("query")),
            persona=_text(data.get("persona")),
            source_sentences=pre_split,
        )

    def metric_fields(self) -> dict[str, str]:
        """The fields a metric may read, without the summary; empty ones are left out."""
        out = {"source": self.source, "reference": self.reference, "query": self.query, "persona": self.persona}
        return {k: v for k, v in out.items() if v}


@dataclass(frozen=True)
class Variant:
    """One perturbed text of one row at one level; `text` is None when it could not be made."""

    row_id: str
    test: str
    level: int
    label: str
    text: str | None
    note: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Perturbed:
    """A test's variants: `variants[row_id][level]` is the tuple of texts at that level."""

    test: str
    levels: tuple[str, ...]
    variants: Mapping[str, tuple[tuple[Variant, ...], ...]]


def source_sentences(row: StressRow) -> list[str]:
    if row.source_sentences:
        return [" ".join(s.split()) for s in row.source_sentences]
    return split_sentences(row.source) if row.source else []


def _join(base: str, extra: Sequence[str]) -> str:
    return " ".join(p.strip() for p in (base, *extra) if p.strip())


def _check_unique_ids(rows: Sequence[StressRow]) -> None:
    seen: set[str] = set()
    for row in rows:
        if row.id in seen:
            raise StressError(f"row id {row.id!r} occurs twice; ids must be unique")
        seen.add(row.id)


def distractor(rows: Sequence[StressRow], *, seed: int, max_sentences: int = 5) -> Perturbed:
    """Append 1..max_sentences sentences drawn uniformly from other documents' sources.

    Level k keeps the first k of one seeded draw per row, so levels are nested. A row's draw
    depends only on the seed, its id and the pool, not on the order of the rows. Rows without
    sources draw from the other rows' summaries instead.
    """
    _check_unique_ids(rows)
    pool: list[tuple[int, str]] = []
    use_sources = any(r.source or r.source_sentences for r in rows)
    # The pool is ordered by row id so that a row's draw does not depend on the order of the rows.
    for i in sorted(range(len(rows)), key=lambda i: rows[i].id):
        row = rows[i]
        sents = source_sentences(row) if use_sources else split_sentences(row.summary)
        pool.extend((i, s) for s in sents if len(tokenize(s)) >= 3)
    labels = ("original",) + tuple(f"+{k}" for k in range(1, max_sentences + 1))
    per_doc: dict[int, int] = {}
    for j, _ in pool:
        per_doc[j] = per_doc.get(j, 0) + 1
    out: dict[str, tuple[tuple[Variant, ...], ...]] = {}
    for i, row in enumerate(rows):
        available = len(pool) - per_doc.get(i, 0)
        if available < max_sentences:
            raise StressError(
                f"distractor needs at least {max_sentences} sentences from other documents; "
                f"row {row.id!r} has only {available} (give more rows)"
            )
        rng = random.Random(f"{seed}:distractor:{row.id}")
        drawn: list[str] = []
        # Rejection sampling keeps the draw uniform over other documents' sentences.
        for _ in range(1000 * max_sentences):
            j, pick = pool[rng.randrange(len(pool))]
            if j == i or pick in drawn or (row.source and rows[j].source == row.source):
                continue
            drawn.append(pick)
            if len(drawn) == max_sentences:
                break
        else:
            raise StressError(f"could not draw {max_sentences} distinct distractors for row {row.id!r}")
        levels = tuple(
            (Variant(row.id, "distractor", k, labels[k], _join(row.summary, drawn[:k]),
                     {"added": drawn[:k]} if k else {}),)
            for k in range(max_sentences + 1)
        )  # fmt: skip
        out[row.id] = levels
    return Perturbed("distractor", labels, out)


def incremental(rows: Sequence[StressRow], *, max_levels: int | None = None) -> Perturbed:
    """From the empty string, add the summary's sentences one at a time.

    There are max(sentence count) + 1 levels (capped by `max_levels` sentences); a summary with
    fewer sentences stays complete at the higher levels, so every row has every level.
    """
    _check_unique_ids(rows)
    split = {row.id: split_sentences(row.summary) for row in rows}
    top = max((len(s) for s in split.values()), default=0)
    if max_levels is not None:
        top = min(top, max_levels)
    if top < 1:
        raise StressError("incremental addition needs at least one summary with a sentence")
    labels = tuple(f"{k} sent." for k in range(top + 1))
    out: dict[str, tuple[tuple[Variant, ...], ...]] = {}
    for row in rows:
        sents = split[row.id]
        out[row.id] = tuple(
            (Variant(row.id, "incremental", k, labels[k], " ".join(sents[: min(k, len(sents))]),
                     {"sentences": min(k, len(sents)), "of": len(sents)}),)
            for k in range(top + 1)
        )  # fmt: skip
    return Perturbed("incremental", labels, out)


def _overlap(sentence: str, summary_tokens: set[str]) -> float:
    toks = tokenize(sentence)
    if not toks:
        return 1.0
    return sum(t in summary_tokens for t in toks) / len(toks)


def added_source_text(
    rows: Sequence[StressRow], *, seed: int, max_overlap: float = 0.3, min_tokens: int = 6
) -> Perturbed:
    """Append one real source sentence that the summary does not use.

    "Does not use" means at most `max_overlap` of the sentence's tokens occur in the summary;
    one such sentence is drawn with the seed, or the least overlapping one when none qualifies.
    A row without a source gets no variant at level 1 (recorded in the note).
    """
    _check_unique_ids(rows)
    labels = ("original", "+source sentence")
    out: dict[str, tuple[tuple[Variant, ...], ...]] = {}
    for row in rows:
        base = Variant(row.id, "added_source_text", 0, labels[0], row.summary)
        summary_tokens = set(tokenize(row.summary))
        sents = [s for s in source_sentences(row) if len(tokenize(s)) >= min_tokens and s.strip() not in row.summary]
        if not sents:
            added = Variant(row.id, "added_source_text", 1, labels[1], None, {"error": "no usable source sentence"})
        else:
            scored = [(_overlap(s, summary_tokens), s) for s in sents]
            unused = [s for o, s in scored if o <= max_overlap]
            rng = random.Random(f"{seed}:added_source_text:{row.id}")
            pick = unused[rng.randrange(len(unused))] if unused else min(scored)[1]
            note = {"added": pick, "overlap": round(_overlap(pick, summary_tokens), 4)}
            added = Variant(row.id, "added_source_text", 1, labels[1], _join(row.summary, [pick]), note)
        out[row.id] = ((base,), (added,))
    return Perturbed("added_source_text", labels, out)
