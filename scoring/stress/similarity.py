"""Text similarity for the rewrite sanity check: sentence embeddings when available, else TF-IDF.

The embedding backend is the encoder of `scoring.core.embeddings` (all-MiniLM-L6-v2 from the
optional `embeddings` extra, never downloaded); without it, TF-IDF cosine over the texts compared.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from kernel.text import tokenize
from scoring.core.embeddings import load_model

__all__ = ["EmbeddingSimilarity", "Similarity", "TfidfSimilarity", "default_similarity"]

logger = logging.getLogger(__name__)


class Similarity(Protocol):
    name: str

    def pairwise(self, left: Sequence[str], right: Sequence[str]) -> list[float]:
        """Cosine similarity of left[i] and right[i] for every i."""
        ...


class TfidfSimilarity:
    """TF-IDF cosine with smoothed idf fitted on the texts passed in (plus an optional corpus)."""

    name = "tfidf"

    def __init__(self, corpus: Sequence[str] = ()) -> None:
        self._corpus = list(corpus)

    def pairwise(self, left: Sequence[str], right: Sequence[str]) -> list[float]:
        if len(left) != len(right):
            raise ValueError("left and right must have the same length")
        docs = [Counter(tokenize(t)) for t in (*left, *right, *self._corpus)]
        n = len(docs)
        df: Counter[str] = Counter()
        for d in docs:
            df.update(d.keys())
        idf = {t: math.log((1 + n) / (1 + c)) + 1.0 for t, c in df.items()}

        def vec(counts: Counter[str]) -> dict[str, float]:
            return {t: c * idf[t] for t, c in counts.items()}

        out: list[float] = []
        for i in range(len(left)):
            a, b = vec(docs[i]), vec(docs[len(left) + i])
            na = math.sqrt(sum(v * v for v in a.values()))
            nb = math.sqrt(sum(v * v for v in b.values()))
            if na == 0.0 or nb == 0.0:
                out.append(0.0)
                continue
            dot = sum(v * b.get(t, 0.0) for t, v in a.items())
            out.append(dot / (na * nb))
        return out


class EmbeddingSimilarity:
    """Cosine similarity of normalised sentence embeddings; `model` has `encode(texts)`."""

    name = "embedding"

    def __init__(self, model: Any) -> None:
        self._model = model

    @classmethod
    def load(cls) -> EmbeddingSimilarity:
        """The encoder of `scoring.core.embeddings` (shared per process); raises EmbeddingsUnavailable."""
        return cls(load_model())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._model.encode(list(texts)), dtype=float)

    def pairwise(self, left: Sequence[str], right: Sequence[str]) -> list[float]:
        if len(left) != len(right):
            raise ValueError("left and right must have the same length")
        if not left:
            return []
        a, b = self.encode(left), self.encode(right)
        return [float(x) for x in np.sum(a * b, axis=1)]


_default: Similarity | None = None
_lock = threading.Lock()


def default_similarity() -> Similarity:
    """The embedding backend when its model loads, else TF-IDF; loaded once per process."""
    global _default
    with _lock:
        if _default is None:
            try:
                _default = EmbeddingSimilarity.load()
            except Exception as exc:  # any failure to load falls back; the backend name is recorded
                logger.info("embedding model unavailable (%s); using TF-IDF cosine", exc)
                _default = TfidfSimilarity()
        return _default
