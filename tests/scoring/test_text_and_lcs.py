"""The bit-parallel LCS against a plain dynamic programme and rouge-score (the text kernel is tested in tests/kernel)."""

from __future__ import annotations

import random

import pytest
from rouge_score.rouge_scorer import _lcs_table

from kernel.text import tokenize
from scoring.core import lcs
from scoring.core.lcs import lcs_length, lcs_length_bits, lcs_length_dp, lcs_length_rapidfuzz


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


# rapidfuzz's LCSseq on code points (scoring.core.lcs.lcs_length's fast path) against the pure-Python paths.


def test_rapidfuzz_path_matches_the_pure_python_paths_on_random_sequences() -> None:
    rng = random.Random(11)
    for _ in range(400):
        alphabet = rng.randint(1, 12)
        a = [f"w{rng.randrange(alphabet)}" for _ in range(rng.randint(0, 120))]
        b = [f"w{rng.randrange(alphabet + 3)}" for _ in range(rng.randint(0, 120))]
        expected = lcs_length_dp(a, b)
        assert lcs_length_rapidfuzz(a, b) == expected, (a, b)
        assert lcs_length_bits(a, b) == expected, (a, b)


def test_rapidfuzz_path_matches_on_real_long_pairs(rose_examples: list[dict]) -> None:
    for example in rose_examples[:6]:
        source = tokenize(example["source"])
        for summary in list(example["system_outputs"].values())[:4]:
            tokens = tokenize(summary)
            expected = lcs_length_bits(tokens, source)
            assert lcs_length_rapidfuzz(tokens, source) == expected
            assert lcs_length_rapidfuzz(source, tokens) == expected
            assert lcs_length(tokens, source) == expected


def test_rapidfuzz_path_edge_cases() -> None:
    assert lcs_length_rapidfuzz([], []) == 0
    assert lcs_length_rapidfuzz([], ["a"]) == 0
    assert lcs_length_rapidfuzz(["a"], []) == 0
    assert lcs_length_rapidfuzz(["a", "b"], ["c", "d"]) == 0
    # Tokens that look like the mapping's own sentinel characters, and non-ASCII tokens, are just tokens.
    a = ["\x00", "\x01", "é", "日本", "🙂", "\ud800", "x"]
    b = ["\x01", "\x00", "日本", "🙂", "y", "\ud800"]
    assert lcs_length_rapidfuzz(a, b) == lcs_length_dp(a, b) == 4
    # Unhashable-looking but hashable items of mixed types.
    c = [1, "1", 1.5, (1, 2), None]
    d = ["1", 1, None, (1, 2)]
    assert lcs_length_rapidfuzz(c, d) == lcs_length_dp(c, d)


def test_rapidfuzz_path_with_more_than_65k_distinct_tokens() -> None:
    # A vocabulary beyond the Basic Multilingual Plane (code points above 0xFFFF). All tokens are distinct,
    # so a subsequence of ``a`` is its own LCS with ``a``: the expected length is known exactly.
    a = [f"t{i}" for i in range(70_000)]
    tail = a[66_000::20]
    # 70,000 shared tokens (code points past 0xFFFF); two swapped in the middle cost one.
    swapped = [*a[:33_000], a[33_001], a[33_000], *a[33_002:]]
    assert ord(max(lcs._as_code_points(a, swapped)[1])) > 0xFFFF
    assert lcs_length_rapidfuzz(a, swapped) == 69_999
    assert lcs_length_rapidfuzz(a, tail) == len(tail) == 200
    assert lcs_length_rapidfuzz(["new", *tail, "tokens"], a) == len(tail)
    assert lcs_length_rapidfuzz(a, tail[::-1]) == 1
    assert lcs_length_rapidfuzz(a, tail[::-1]) == lcs_length_bits(a, tail[::-1])


def test_tokens_only_one_side_has_share_a_sentinel(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0x10FFFF distinct tokens cannot be built cheaply; lower the ceiling to show what is mapped.
    monkeypatch.setattr(lcs, "MAX_CODE_POINT", 12)
    a = list("abcdefghab")
    b = [*"ijklmnop", "b", "a", "q", "b"]
    left, right = lcs._as_code_points(a, b)
    assert set(left) | set(right) <= {chr(i) for i in range(13)}
    assert lcs_length_rapidfuzz(a, b) == lcs_length_dp(a, b) == 3


def test_a_shared_vocabulary_beyond_unicode_takes_the_pure_python_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lcs, "MAX_CODE_POINT", 5)
    a = list("abcdefgh")
    b = list("hgfedcbabcdefgh")
    assert lcs._as_code_points(a, b) is None
    assert lcs_length_rapidfuzz(a, b) == lcs_length_dp(a, b) == 8


def test_lcs_length_without_rapidfuzz_uses_the_bit_parallel_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lcs, "_similarity", None)
    assert lcs_length("ABCBDAB", "BDCABA") == 4
    with pytest.raises(RuntimeError):
        lcs_length_rapidfuzz("a", "a")
