"""Okapi BM25 over pre-tokenised documents, on bm25s (sparse matrices, no Python loop per document).

The demo corpus retrieval and the corpus search's SQLite fallback both rank with :class:`BM25Index`;
the tokens are the caller's (usually :func:`kernel.text.index_terms`). The score of a document d for
query terms Q (each distinct term counted once) is

    sum over t in Q and d of  idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

which is bm25s's "lucene" variant times the constant (k1 + 1): the idf stays positive for terms in
more than half of the documents, and the constant keeps the scores those of the textbook formula.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable, Sequence

import bm25s
import numpy as np
import numpy.typing as npt

from kernel.text import CorpusTermStats

__all__ = ["BM25Index", "bm25s_term_stats"]

# bm25s sets its logger to DEBUG on import, which would log a line per index built (the corpus
# fallback builds one per question) wherever the root logger prints debug messages.
logging.getLogger("bm25s").setLevel(logging.WARNING)


class BM25Index:
    """An index of ``documents`` (each a list of tokens) that scores a query against every document."""

    def __init__(self, documents: Sequence[Sequence[str]], *, k1: float = 1.2, b: float = 0.75) -> None:
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        self.k1 = k1
        self.b = b
        self.n_documents = len(documents)
        self._vocabulary: frozenset[str] = frozenset(t for d in documents for t in d)
        self._index: bm25s.BM25 | None = None
        if self._vocabulary:  # bm25s cannot index a corpus without a single token
            # float64 so that scores match the formula above to the last printed digit.
            self._index = bm25s.BM25(k1=k1, b=b, method="lucene", dtype="float64")
            self._index.index([list(d) for d in documents], show_progress=False)

    @property
    def vocabulary(self) -> frozenset[str]:
        """Every token that occurs in at least one document."""
        return self._vocabulary

    def term_stats(self) -> CorpusTermStats:
        """The document frequency of every indexed term (kernel.text.sources_miss_question weighs by them)."""
        if self._index is None:
            return CorpusTermStats(n_documents=self.n_documents, document_frequency=lambda term: 0)
        return bm25s_term_stats(self._index, self.n_documents)

    def scores(self, query: Iterable[str]) -> npt.NDArray[np.float64]:
        """One BM25 score per document, in document order; 0.0 where no query term occurs."""
        terms = [t for t in dict.fromkeys(query) if t in self._vocabulary]
        if self._index is None or not terms:
            return np.zeros(self.n_documents, dtype=np.float64)
        raw = self._index.get_scores(terms)
        return np.asarray(raw, dtype=np.float64) * (self.k1 + 1.0)

    def top(self, query: Iterable[str], k: int, *, allowed: Iterable[int] | None = None) -> list[tuple[int, float]]:
        """The ``k`` best ``(document index, score)`` with a positive score, ties in document order.

        ``allowed`` restricts the ranking to those document indices (a filter).
        """
        scores = self.scores(query)
        if allowed is not None:
            mask = np.zeros(self.n_documents, dtype=bool)
            mask[list(allowed)] = True
            scores = np.where(mask, scores, 0.0)
        candidates = np.flatnonzero(scores > 0)
        # Stable sort on the negated score keeps equal scores in document order.
        order = candidates[np.argsort(-scores[candidates], kind="stable")][:k]
        return [(int(i), float(scores[i])) for i in order]


_TERM_STATS: weakref.WeakKeyDictionary[bm25s.BM25, CorpusTermStats] = weakref.WeakKeyDictionary()


def bm25s_term_stats(model: bm25s.BM25, n_documents: int) -> CorpusTermStats:
    """Document frequencies read off a bm25s index, once per index: its score matrix keeps, per term, one
    entry for each document holding it (the lucene idf is positive), so a term's count of entries is its
    frequency."""
    stats = _TERM_STATS.get(model)
    if stats is None or stats.n_documents != n_documents:
        stats = _TERM_STATS[model] = _read_term_stats(model, n_documents)
    return stats


def _read_term_stats(model: bm25s.BM25, n_documents: int) -> CorpusTermStats:
    counts = np.diff(np.asarray(model.scores["indptr"]))
    vocabulary = model.vocab_dict

    def document_frequency(term: str) -> int:
        where = vocabulary.get(term)
        return 0 if where is None else int(counts[where])

    return CorpusTermStats(n_documents=n_documents, document_frequency=document_frequency)
