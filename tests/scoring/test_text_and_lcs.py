"""The bit-parallel LCS against a plain dynamic programme and rouge-score (the text kernel is tested in tests/kernel)."""

from __future__ import annotations

import random

from rouge_score.rouge_scorer import _lcs_table

from kernel.text import tokenize
from scoring.core.lcs import lcs_length, lcs_length_dp


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
