"""Tokeniser, sentence splitter and the bit-parallel LCS against a plain dynamic programme."""

from __future__ import annotations

import random

from rouge_score.rouge_scorer import _lcs_table

from kernel.text import split_sentences, tokenize
from scoring.core.lcs import lcs_length, lcs_length_dp


def test_tokenize_default_is_lowercase_alphanumeric() -> None:
    assert tokenize("Don't stop: GPT-4 scored 2.5x (vs. BERT)!") == [
        "don", "t", "stop", "gpt", "4", "scored", "2", "5x", "vs", "bert",
    ]  # fmt: skip
    assert tokenize("snake_case Ünïcode") == ["snake", "case", "ünïcode"]


def test_tokenize_is_configurable() -> None:
    assert tokenize("New York", lowercase=False) == ["New", "York"]
    assert tokenize("state-of-the-art model", pattern=r"[\w-]+") == ["state-of-the-art", "model"]


def test_split_sentences_keeps_abbreviations_and_initials_together() -> None:
    text = (
        "Dr. Smith et al. proposed a model, e.g. for news. It works! "
        'J. K. Rowling wrote "Harry Potter." Then 3 more.\n\nNew paragraph without a stop'
    )
    assert split_sentences(text) == [
        "Dr. Smith et al. proposed a model, e.g. for news.",
        "It works!",
        'J. K. Rowling wrote "Harry Potter."',
        "Then 3 more.",
        "New paragraph without a stop",
    ]


def test_split_sentences_does_not_break_decimals_or_lowercase_continuations() -> None:
    assert split_sentences("Accuracy rose to 93.5 percent. the next one is lower-case.") == [
        "Accuracy rose to 93.5 percent. the next one is lower-case."
    ]


def test_lcs_matches_dp_on_random_sequences() -> None:
    rng = random.Random(7)
    for _ in range(400):
        alphabet = rng.randint(1, 8)
        a = [rng.randrange(alphabet) for _ in range(rng.randint(0, 90))]
        b = [rng.randrange(alphabet) for _ in range(rng.randint(0, 90))]
        assert lcs_length(a, b) == lcs_length_dp(a, b), (a, b)


def test_lcs_known_values() -> None:
    assert lcs_length("ABCBDAB", "BDCABA") == 4
    assert lcs_length([], ["a"]) == 0
    assert lcs_length(["x"] * 5, ["x"] * 3) == 3
    assert lcs_length("abc", "xyz") == 0


def test_lcs_matches_dp_and_rouge_on_real_summaries(rose_examples: list[dict]) -> None:
    for example in rose_examples[:6]:
        source = tokenize(example["source"])
        for summary in list(example["system_outputs"].values())[:4]:
            tokens = tokenize(summary)
            expected = lcs_length_dp(tokens, source)
            assert lcs_length(tokens, source) == expected
            assert lcs_length(source, tokens) == expected
            assert _lcs_table(source, tokens)[-1][-1] == expected
