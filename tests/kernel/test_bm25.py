"""The kernel's BM25: the textbook Okapi formula on bm25s, ties in document order, filters."""

from __future__ import annotations

import math

import pytest

from kernel.bm25 import BM25Index

DOCS = [["night", "shift", "nurs", "sleep", "night"], ["vaccin", "antibody"], ["sleep", "student"], ["night", "shift"]]


def okapi(query: list[str], doc: list[str], k1: float = 1.2, b: float = 0.75) -> float:
    avgdl = sum(map(len, DOCS)) / len(DOCS)
    total = 0.0
    for term in set(query):
        df = sum(term in d for d in DOCS)
        if term in doc:
            tf = doc.count(term)
            idf = math.log(1 + (len(DOCS) - df + 0.5) / (df + 0.5))
            total += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(doc) / avgdl))
    return total


def test_scores_are_the_okapi_formula() -> None:
    index = BM25Index(DOCS)
    query = ["night", "sleep", "sleep", "unknown"]
    assert index.scores(query).tolist() == pytest.approx([okapi(query, d) for d in DOCS], abs=1e-12)


def test_top_skips_non_matching_documents_keeps_ties_in_order_and_filters() -> None:
    index = BM25Index([["a", "b"], ["c"], ["a", "b"], ["a", "b"]])
    assert [i for i, _ in index.top(["a"], 10)] == [0, 2, 3]
    assert [i for i, _ in index.top(["a"], 2, allowed={2, 3, 1})] == [2, 3]
    assert index.top(["zzz"], 3) == [] and index.top([], 3) == []


def test_a_corpus_without_tokens_scores_zero() -> None:
    index = BM25Index([[], []])
    assert index.scores(["a"]).tolist() == [0.0, 0.0] and index.top(["a"], 1) == []
    with pytest.raises(ValueError):
        BM25Index(DOCS, b=2.0)
