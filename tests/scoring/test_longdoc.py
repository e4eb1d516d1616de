"""Retrieval-window scoring and claim similarity on a real SQuALITY story (TF-IDF embedder, no torch)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from kernel.text import split_sentences, tokenize
from scoring.core.longdoc import (
    TfidfEmbedder,
    bin_by_similarity,
    claim_similarity,
    retrieve_snippets,
    score_long_document,
)


def token_recall(sentence: str, snippet: str) -> float:
    """Share of the sentence's tokens found in the snippet (a simple sentence-level support metric)."""
    wanted = Counter(tokenize(sentence))
    found = Counter(tokenize(snippet)) & wanted
    return sum(found.values()) / max(sum(wanted.values()), 1)


@pytest.fixture(scope="module")
def story_sentences(squality_story: dict[str, Any]) -> list[str]:
    sentences = split_sentences(squality_story["document"])
    assert len(sentences) > 200  # a long document
    return sentences


def _long_distinct(sentences: list[str], start: int) -> int:
    """Index of the first sentence from ``start`` on that is long and occurs once."""
    counts = Counter(sentences)
    return next(
        i for i in range(start, len(sentences)) if len(tokenize(sentences[i])) >= 12 and counts[sentences[i]] == 1
    )


def test_copied_sentence_is_retrieved_with_the_requested_window(story_sentences: list[str]) -> None:
    i = _long_distinct(story_sentences, 120)
    embedder = TfidfEmbedder()
    (only,) = retrieve_snippets([story_sentences[i]], story_sentences, k=1, window=0, embedder=embedder)
    assert [(s.start, s.end, s.center) for s in only] == [(i, i + 1, i)]
    (wide,) = retrieve_snippets([story_sentences[i]], story_sentences, k=1, window=2, embedder=embedder)
    assert (wide[0].start, wide[0].end) == (i - 2, i + 3)
    assert wide[0].text == " ".join(story_sentences[i - 2 : i + 3])
    (several,) = retrieve_snippets([story_sentences[i]], story_sentences, k=3, window=1, embedder=embedder)
    assert len(several) == 3 and several[0].center == i
    assert several[0].similarity >= several[1].similarity >= several[2].similarity


def test_window_supplies_evidence_spread_over_neighbouring_sentences(story_sentences: list[str]) -> None:
    i = _long_distinct(story_sentences, 200)
    j = _long_distinct(story_sentences, i + 30)
    # Claim 1 fuses sentence i with its successor; claim 2 copies sentence j.
    fused = f"{story_sentences[i]} {story_sentences[i + 1]}".replace(". ", ", and ")
    copied = story_sentences[j]
    narrow = score_long_document(
        [fused, copied], story_sentences, token_recall, k=1, window=0, embedder=TfidfEmbedder()
    )
    wide = score_long_document([fused, copied], story_sentences, token_recall, k=1, window=1, embedder=TfidfEmbedder())
    assert narrow.sentences[1].score == pytest.approx(1.0)
    assert narrow.sentences[0].score < 0.95  # half the claim's evidence is in the next sentence
    assert wide.sentences[0].score == pytest.approx(1.0)
    assert wide.score > narrow.score
    assert wide.score == pytest.approx((wide.sentences[0].score + wide.sentences[1].score) / 2)
    assert (narrow.k, narrow.window, narrow.embedder) == (1, 0, "tfidf")


def test_claim_similarity_and_bins(story_sentences: list[str]) -> None:
    generic = "He said that he was there."
    specific = story_sentences[_long_distinct(story_sentences, 300)]
    sims = claim_similarity([generic, specific], story_sentences, embedder=TfidfEmbedder())
    assert len(sims) == 2 and all(-1.0 <= s <= 1.0 for s in sims)
    bins = bin_by_similarity([0.1, 0.2, 0.35, 0.9], [1.0, 0.0, 0.5, 0.25], bins=[0.0, 0.25, 0.5, 1.0])
    assert [(b.count, b.mean_score) for b in bins] == [(2, 0.5), (1, 0.5), (1, 0.25)]
    equal_width = bin_by_similarity([0.0, 0.5, 1.0], [1.0, 2.0, 3.0], bins=2)
    assert [b.count for b in equal_width] == [1, 2]  # the maximum falls in the last bin
    with pytest.raises(ValueError):
        bin_by_similarity([0.1], [1.0], bins=[0.5, 0.5])


def test_invalid_parameters_are_rejected(story_sentences: list[str]) -> None:
    with pytest.raises(ValueError):
        retrieve_snippets(["x"], story_sentences, k=0, embedder=TfidfEmbedder())
    with pytest.raises(ValueError):
        score_long_document("", story_sentences, token_recall, embedder=TfidfEmbedder())
