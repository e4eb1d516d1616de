"""Standard extractive baselines as offline generation backends: lead-k and a TextRank graph ranker.

Both copy sentences verbatim from the retrieved abstracts and cite them as [n] like the extractive
summariser, so an 8-system study (four offline "models" crossed with the two conditions) runs with no
model server. Plain Python and networkx, no Django, deterministic for the same input.

- ``lead-k``: the opening sentence(s) of the top k sources, the classic news-summarisation baseline
  (abstracts open with their context and aim). With a persona, the k sources are those of the top 2k
  retrieved that the persona profile matches best (ties by retrieval rank) instead of the first k.
- ``textrank``: Mihalcea and Tarau's TextRank (2004): a graph over all sentences, edges weighted by
  their word overlap normalised by log lengths, ranked by PageRank; the most central sentences are
  taken. With a persona, PageRank restarts in proportion to each sentence's similarity to the profile
  (a biased TextRank, Kazemi et al. 2020), so central sentences about the reader's concerns rise.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx

from generation.offline_summariser import _cite, extractive_usage
from generation.persona_lexicon import PersonaTerms
from kernel.backends import BackendError, Document, Generation, GenerationRequest
from kernel.text import count_words, cut_words, index_terms, split_sentences

__all__ = ["BASELINES", "BASELINE_LEAD", "BASELINE_TEXTRANK", "BaselineSummariser"]

BASELINE_LEAD = "lead-k"
BASELINE_TEXTRANK = "textrank"
BASELINES = (BASELINE_LEAD, BASELINE_TEXTRANK)


@dataclass(frozen=True)
class _Sentence:
    doc_rank: int  # 1-based rank in request.documents
    position: int  # 0-based index within its abstract
    text: str
    terms: Counter[str]
    n_words: int


@dataclass(frozen=True)
class _Settings:
    k: int = 3  # lead-k: how many sources
    sentences_per_source: int = 1  # lead-k: opening sentences taken from each
    max_sentences: int = 5  # textrank
    max_words: int = 130  # textrank: stop before exceeding; both: a longer sentence is cut to this many words
    damping: float = 0.85  # textrank: PageRank's damping factor

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> _Settings:
        defaults = cls()
        values: dict[str, Any] = {}
        for name in cls.__dataclass_fields__:
            if name in settings:
                raw = settings[name]
                try:
                    values[name] = type(getattr(defaults, name))(raw)
                except (TypeError, ValueError) as exc:
                    raise BackendError(f"Setting {name}={raw!r} is not a number.", transient=False) from exc
        chosen = cls(**{**defaults.__dict__, **values})
        if min(chosen.k, chosen.sentences_per_source, chosen.max_sentences, chosen.max_words) < 1:
            raise BackendError("Baseline length settings must be at least 1.", transient=False)
        if not 0.0 < chosen.damping < 1.0:
            raise BackendError("The TextRank damping factor must be between 0 and 1.", transient=False)
        return chosen


def _sentences(documents: Sequence[Document], *, max_words: int) -> list[_Sentence]:
    out = []
    for rank, document in enumerate(documents, start=1):
        # Exact substrings (fold=False): a summary sentence is copied verbatim and cited; one longer than
        # max_words (an abstract with no sentence breaks) as its first max_words words and an ellipsis.
        for position, whole in enumerate(split_sentences(document.abstract, fold=False)):
            text = cut_words(whole, max_words)
            terms = Counter(index_terms(text))
            if terms:
                out.append(_Sentence(rank, position, text, terms, min(count_words(text), max_words)))
    return out


def _cosine(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    dot = sum(v * b.get(t, 0.0) for t, v in a.items())
    norm = math.sqrt(sum(v * v for v in a.values())) * math.sqrt(sum(v * v for v in b.values()))
    return dot / norm if norm else 0.0


def textrank_similarity(a: Counter[str], b: Counter[str]) -> float:
    """Mihalcea and Tarau's sentence similarity: shared words over log(|a|) + log(|b|)."""
    shared = len(a.keys() & b.keys())
    size_a, size_b = sum(a.values()), sum(b.values())
    if not shared or size_a + size_b <= 2:
        # Two one-word sentences have log-length 0; one shared word is then full overlap.
        return float(shared)
    return shared / (math.log(size_a) + math.log(size_b))


class BaselineSummariser:
    """lead-k and TextRank; ``request.model`` selects one, ``request.persona`` the personalised variant."""

    def generate(self, request: GenerationRequest) -> Generation:
        started = time.perf_counter()
        if request.model not in BASELINES:
            raise BackendError(
                f"Unknown baseline model {request.model!r}; choose one of {', '.join(BASELINES)}.", transient=False
            )
        settings = _Settings.from_mapping(request.settings or {})
        sentences = _sentences(request.documents, max_words=settings.max_words)
        if not sentences:
            raise BackendError("No abstract text to summarise: the retrieved documents are empty.", transient=False)
        persona = PersonaTerms.from_mapping(request.persona)
        if request.model == BASELINE_LEAD:
            chosen, scores = self._lead(sentences, persona, settings)
        else:
            chosen, scores = self._textrank(sentences, persona, settings)
        chosen.sort(key=lambda i: (sentences[i].doc_rank, sentences[i].position))
        text = " ".join(_cite(sentences[i].text, sentences[i].doc_rank) for i in chosen)
        n_words = sum(sentences[i].n_words for i in chosen)
        raw = {
            "backend": "offline-baseline",
            "strategy": request.model,
            "persona_applied": persona is not None,
            "candidate_sentences": len(sentences),
            "selected": [
                {
                    "doc": sentences[i].doc_rank,
                    "sentence": sentences[i].position,
                    "id": f"{sentences[i].doc_rank}:{sentences[i].position}",
                    "score": round(scores[i], 6),
                }
                for i in chosen
            ],
        }
        usage = extractive_usage(
            request, completion_words=n_words, input_sentences=len(sentences), selected=len(chosen)
        )
        return Generation(
            text=text, raw_response=raw, usage=usage, latency_s=time.perf_counter() - started, finish_reason="stop"
        )

    @staticmethod
    def _lead(
        sentences: Sequence[_Sentence], persona: PersonaTerms | None, settings: _Settings
    ) -> tuple[list[int], list[float]]:
        ranks = sorted({s.doc_rank for s in sentences})
        if persona is None:
            sources = ranks[: settings.k]
            score = {rank: 1.0 if rank in sources else 0.0 for rank in ranks}
        else:
            # How well each source's whole abstract matches the profile; ties keep retrieval order.
            words: dict[int, Counter[str]] = {rank: Counter() for rank in ranks}
            for s in sentences:
                words[s.doc_rank].update(s.terms)
            score = {rank: _cosine(persona.terms, words[rank]) for rank in ranks}
            # Among the top 2k only: the persona reorders relevant sources, it does not replace relevance.
            pool = ranks[: 2 * settings.k]
            sources = sorted(pool, key=lambda rank: (-score[rank], rank))[: settings.k]
        chosen = [
            i for i, s in enumerate(sentences) if s.doc_rank in sources and s.position < settings.sentences_per_source
        ]
        return chosen, [score[s.doc_rank] for s in sentences]

    @staticmethod
    def _textrank(
        sentences: Sequence[_Sentence], persona: PersonaTerms | None, settings: _Settings
    ) -> tuple[list[int], list[float]]:
        graph = nx.Graph()
        graph.add_nodes_from(range(len(sentences)))
        for i in range(len(sentences)):
            for j in range(i + 1, len(sentences)):
                weight = textrank_similarity(sentences[i].terms, sentences[j].terms)
                if weight > 0:
                    graph.add_edge(i, j, weight=weight)
        restart: dict[int, float] | None = None
        if persona is not None:
            # A little restart mass everywhere keeps sentences the profile does not mention reachable.
            restart = {i: 0.01 + _cosine(persona.terms, s.terms) for i, s in enumerate(sentences)}
        rank: dict[int, float] = nx.pagerank(
            graph, alpha=settings.damping, personalization=restart, weight="weight", max_iter=200, tol=1e-10
        )
        order = sorted(rank, key=lambda i: (-rank[i], sentences[i].doc_rank, sentences[i].position))
        chosen: list[int] = []
        total = 0
        for i in order:
            if len(chosen) >= settings.max_sentences:
                break
            if chosen and total + sentences[i].n_words > settings.max_words:
                continue
            chosen.append(i)
            total += sentences[i].n_words
        return chosen, [rank[i] for i in range(len(sentences))]
