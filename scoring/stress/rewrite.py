"""LLM-written perturbations: versioned prompt templates, cached rewrites and a sanity check.

Each rewrite goes through `modelserver.ChatClient`, whose disk cache is keyed by the full
request, so a rerun with the same prompts, model and seed sends nothing. The sanity check flags
rewrites whose similarity to the original or whose length ratio suggests content was dropped or added.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from kernel.text import count_words, tokenize
from modelserver import ChatClient, LLMError, chat_messages, map_concurrently
from scoring.stress.perturb import TESTS, Perturbed, StressError, StressRow, TestKind, Variant
from scoring.stress.similarity import Similarity, default_similarity

__all__ = [
    "AUDIENCES",
    "LENGTHEN_FACTORS",
    "PROMPTS",
    "SHORTEN_FACTORS",
    "PromptTemplate",
    "RewriteRecord",
    "SanityCheck",
    "SanityPolicy",
    "llm_perturbation",
    "rewrite_messages",
]

AUDIENCES = ("undergraduate student", "journalist", "domain expert")
LENGTHEN_FACTORS = (1.5, 2.0, 3.0)
SHORTEN_FACTORS = (0.8, 0.6, 0.4)
SOURCE_CHARS = 12_000
"""Grounding source text is cut to this many characters so long documents fit a context window."""


@dataclass(frozen=True)
class PromptTemplate:
    """A rewrite instruction; bump `version` whenever the wording changes (it is in every record)."""

    name: str
    version: int
    system: str
    user: str
    expected_length: float = 1.0
    """Expected words(rewrite) / words(original), used by the sanity check (overridden by length factors)."""
    with_source: bool = False


_SYSTEM = (
    "You rewrite summaries for a study of evaluation metrics. Keep every fact of the original "
    "summary and add no new facts unless told to. Reply with the rewritten summary only: no "
    "preamble, no quotes, no notes."
)

PROMPTS: Mapping[str, PromptTemplate] = {
    p.name: p
    for p in (
        PromptTemplate(
            "lengthen", 1, _SYSTEM,
            "Expand the summary below into longer prose of about {target_words} words (about {factor:g} times "
            "its length). Use more words, fuller sentences and connectives, but introduce no information that "
            "is not already in the summary. The source document is given only as grounding context.\n\n"
            "Source document:\n{source}\n\nSummary:\n{summary}",
            with_source=True,
        ),
        PromptTemplate(
            "shorten", 1, _SYSTEM,
            "Condense the summary below to about {target_words} words (about {factor:g} times its length) "
            "while keeping all of its content. Remove redundancy and wordiness, not facts.\n\nSummary:\n{summary}",
        ),
        PromptTemplate(
            "audience", 1, _SYSTEM,
            "Rewrite the summary below for a reader who is a {audience}. Adapt the vocabulary, emphasis and "
            "level of detail to what such a reader needs, staying faithful to the summary.\n\nSummary:\n{summary}",
        ),
        PromptTemplate(
            "paraphrased", 1, _SYSTEM,
            "Paraphrase the summary below: change the sentence structure and wording throughout while keeping "
            "exactly the same meaning.\n\nSummary:\n{summary}",
        ),
        PromptTemplate(
            "simplified", 1, _SYSTEM,
            "Simplify the summary below: break long or complex sentences into short, simple sentences and use "
            "plain syntax, keeping exactly the same meaning.\n\nSummary:\n{summary}",
        ),
        PromptTemplate(
            "synonym_replaced", 1, _SYSTEM,
            "Replace as many content words (nouns, verbs, adjectives, adverbs) of the summary below as possible "
            "with synonyms, keeping the sentence structure and the meaning.\n\nSummary:\n{summary}",
        ),
        PromptTemplate(
            "less_diverse", 1, _SYSTEM,
            "Rewrite the summary below with less lexical diversity: reuse the same words and phrases instead of "
            "varied ones, keeping exactly the same meaning.\n\nSummary:\n{summary}",
        ),
        PromptTemplate(
            "negated", 1, _SYSTEM,
            "Rewrite the summary below so that its claims are stated through logically equivalent negations "
            "(for example 'X succeeded' becomes 'X did not fail'), keeping exactly the same meaning.\n\n"
            "Summary:\n{summary}",
        ),
        PromptTemplate(
            "summarised", 1, _SYSTEM,
            "Summarise the summary below more compactly, keeping its main facts and adding nothing.\n\n"
            "Summary:\n{summary}",
            expected_length=0.6,
        ),
    )
}  # fmt: skip


@dataclass(frozen=True)
class SanityPolicy:
    """When a rewrite counts as having dropped or added content."""

    min_similarity_embedding: float = 0.6
    min_similarity_tfidf: float = 0.2
    min_length_ratio: float = 0.5
    """Lowest accepted words(rewrite) / (expected length factor * words(original))."""
    max_length_ratio: float = 2.0

    def min_similarity(self, backend: str) -> float:
        return self.min_similarity_embedding if backend == "embedding" else self.min_similarity_tfidf


@dataclass(frozen=True)
class SanityCheck:
    similarity: float
    backend: str
    length_ratio: float
    expected_length_ratio: float
    flagged: bool
    reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "similarity": round(self.similarity, 6),
            "backend": self.backend,
            "length_ratio": round(self.length_ratio, 6),
            "expected_length_ratio": self.expected_length_ratio,
            "flagged": self.flagged,
            "reasons": list(self.reasons),
        }


@dataclass(frozen=True)
class RewriteRecord:
    """One LLM rewrite with its provenance, its sanity check, or why it failed."""

    row_id: str
    test: str
    level: int
    label: str
    prompt: str
    prompt_version: int
    model: str
    text: str | None
    error: str | None = None
    cached: bool = False
    latency_s: float = 0.0
    sanity: SanityCheck | None = None
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "latency_s": round(self.latency_s, 4),
            "sanity": self.sanity.to_dict() if self.sanity else None,
        }


@dataclass(frozen=True)
class _Request:
    row: StressRow
    level: int
    label: str
    params: dict[str, Any]
    expected_length: float


def _plan(test: str, rows: Sequence[StressRow]) -> tuple[tuple[str, ...], list[_Request]]:
    prompt = PROMPTS[test]
    reqs: list[_Request] = []
    if test in ("lengthen", "shorten"):
        factors = LENGTHEN_FACTORS if test == "lengthen" else SHORTEN_FACTORS
        labels = ("original", *(f"x{f:g}" for f in factors))
        for row in rows:
            for k, f in enumerate(factors, start=1):
                reqs.append(_Request(row, k, labels[k], {"factor": f}, f))
    elif test == "audience":
        labels = ("original", "other audience")
        for row in rows:
            for audience in AUDIENCES:
                # An audience the row's own persona names is not a different audience.
                if audience in row.persona.lower():
                    continue
                reqs.append(_Request(row, 1, labels[1], {"audience": audience}, prompt.expected_length))
    else:
        labels = ("original", test)
        reqs = [_Request(row, 1, labels[1], {}, prompt.expected_length) for row in rows]
    return labels, reqs


def rewrite_messages(test: str, row: StressRow, params: Mapping[str, Any]) -> list[dict[str, str]]:
    """The chat messages that ask for one rewrite (public so that prompts can be inspected)."""
    prompt = PROMPTS[test]
    # Counted as the offline summaries' budget is (kernel.text.count_words): a Chinese summary has no spaces.
    words = count_words(row.summary)
    factor = float(params.get("factor", 1.0))
    fields = {
        "summary": row.summary,
        "source": row.source[:SOURCE_CHARS] if prompt.with_source else "",
        "audience": str(params.get("audience", "")),
        "factor": factor,
        "target_words": max(1, round(words * factor)),
    }
    return chat_messages(prompt.user.format(**fields), system=prompt.system)


_PREAMBLE = re.compile(r"^(here is|here's|sure|certainly|rewritten summary|summary)\b[^\n]*:\s*\n", re.IGNORECASE)


def _clean(reply: str) -> str:
    text = reply.strip()
    text = re.sub(r"^```\w*\n?|\n?```$", "", text).strip()
    text = _PREAMBLE.sub("", text, count=1).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return " ".join(text.split())


def sanity_checks(
    originals: Sequence[str],
    rewrites: Sequence[str],
    expected: Sequence[float],
    *,
    similarity: Similarity,
    policy: SanityPolicy,
) -> list[SanityCheck]:
    """Flag rewrites that look like they dropped or added content."""
    sims = similarity.pairwise(list(originals), list(rewrites)) if originals else []
    out: list[SanityCheck] = []
    floor = policy.min_similarity(similarity.name)
    for orig, new, exp, sim in zip(originals, rewrites, expected, sims, strict=True):
        n_orig = max(1, len(tokenize(orig)))
        ratio = len(tokenize(new)) / n_orig
        reasons: list[str] = []
        if sim < floor:
            reasons.append(f"{similarity.name} similarity {sim:.2f} < {floor:g}")
        rel = ratio / exp
        if rel < policy.min_length_ratio:
            reasons.append(f"length ratio {ratio:.2f} far below the expected {exp:g} (content dropped?)")
        elif rel > policy.max_length_ratio:
            reasons.append(f"length ratio {ratio:.2f} far above the expected {exp:g} (content added?)")
        out.append(SanityCheck(sim, similarity.name, ratio, exp, bool(reasons), tuple(reasons)))
    return out


def llm_perturbation(
    test: str,
    rows: Sequence[StressRow],
    client: ChatClient,
    *,
    similarity: Similarity | None = None,
    policy: SanityPolicy | None = None,
    use_cache: bool = True,
    on_done: Callable[[int, int], None] | None = None,
) -> tuple[Perturbed, list[RewriteRecord]]:
    """Ask the model for every rewrite of `test`, check each, and return the levels and records.

    A failed request leaves that variant's text None with the reason in its record, so one
    flaky call costs one data point, not the run.
    """
    spec = TESTS.get(test)
    if spec is None or spec.kind is not TestKind.LLM:
        raise StressError(f"{test!r} is not an LLM perturbation")
    prompt = PROMPTS[test]
    labels, reqs = _plan(test, rows)

    def call(req: _Request) -> RewriteRecord:
        record = RewriteRecord(
            row_id=req.row.id, test=test, level=req.level, label=req.label, prompt=prompt.name,
            prompt_version=prompt.version, model=client.config.model, text=None, params=dict(req.params),
        )  # fmt: skip
        try:
            result = client.complete(rewrite_messages(test, req.row, req.params), use_cache=use_cache)
        except LLMError as exc:
            return replace(record, error=exc.reason)
        record = replace(record, cached=result.cached, latency_s=result.latency_s)
        text = _clean(result.text)
        if not text:
            return replace(record, error="the model returned an empty rewrite")
        if result.truncated:
            return replace(record, error="the rewrite was cut off at max_tokens")
        return replace(record, text=text)

    records = map_concurrently(call, reqs, concurrency=client.config.concurrency, on_done=on_done)

    ok = [(i, r) for i, r in enumerate(records) if r.text is not None]
    if ok:
        sim = similarity or default_similarity()
        checks = sanity_checks(
            [reqs[i].row.summary for i, _ in ok],
            [r.text or "" for _, r in ok],
            [reqs[i].expected_length for i, _ in ok],
            similarity=sim,
            policy=policy or SanityPolicy(),
        )
        for (i, rec), check in zip(ok, checks, strict=True):
            records[i] = replace(rec, sanity=check)

    by_row: dict[str, list[list[Variant]]] = {
        row.id: [[Variant(row.id, test, 0, labels[0], row.summary)]] + [[] for _ in labels[1:]] for row in rows
    }
    for req, rec in zip(reqs, records, strict=True):
        note: dict[str, Any] = dict(req.params)
        if rec.error:
            note["error"] = rec.error
        if rec.sanity is not None:
            note["flagged"] = rec.sanity.flagged
        by_row[req.row.id][req.level].append(Variant(req.row.id, test, req.level, req.label, rec.text, note))
    variants = {rid: tuple(tuple(level) for level in levels) for rid, levels in by_row.items()}
    return Perturbed(test, labels, variants), records
