"""The LCS paths (rapidfuzz on codes, LcsSource, pure-Python bit-parallel) against a plain dynamic programme and
rouge-score (the text kernel is tested in tests/kernel)."""

from __future__ import annotations

import random

import pytest
from rouge_score.rouge_scorer import _lcs_table

from kernel.text import tokenize
from scoring.core import lcs
from scoring.core.lcs import LcsSource, lcs_length, lcs_length_bits, lcs_length_dp, lcs_length_rapidfuzz


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


# rapidfuzz's LCSseq on codes (scoring.core.lcs.lcs_length's fast path) against the pure-Python paths.


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
    coded = lcs._as_codes(a, swapped)
    assert coded is not None and isinstance(coded[1], str) and ord(max(coded[1])) > 0xFFFF
    assert lcs_length_rapidfuzz(a, swapped) == 69_999
    assert lcs_length_rapidfuzz(a, tail) == len(tail) == 200
    assert lcs_length_rapidfuzz(["new", *tail, "tokens"], a) == len(tail)
    assert lcs_length_rapidfuzz(a, tail[::-1]) == 1
    assert lcs_length_rapidfuzz(a, tail[::-1]) == lcs_length_bits(a, tail[::-1])


def test_tokens_the_shorter_side_lacks_are_dropped_from_the_longer() -> None:
    a = list("abcdefghab")  # the shorter side: its eight distinct tokens are numbered 1..8
    b = [*"ijklmnop", "b", "a", "q", "b"]
    coded = lcs._as_codes(a, b)
    assert coded is not None
    left, right = coded
    assert isinstance(left, bytes) and isinstance(right, bytes)
    assert len(left) == len(a) and set(left) == set(range(1, 9))
    assert right == bytes([left[1], left[0], left[1]])  # i..p and q are gone: b, a, b
    assert lcs_length_rapidfuzz(a, b) == lcs_length_rapidfuzz(b, a) == lcs_length_dp(a, b) == 3


@pytest.mark.parametrize(("distinct", "kind"), [(255, bytes), (256, str)])
def test_byte_codes_up_to_255_distinct_tokens_then_characters(distinct: int, kind: type) -> None:
    # All tokens distinct; ``b`` holds a's even positions, a stranger, then its odd positions. An LCS is an
    # increasing run of a's indices through b: the evens up to 2k, then the odds above 2k. For n tokens
    # that is k + 1 + (n // 2 - k) = n // 2 + 1 whatever k (128 for 255, 129 for 256).
    a = [f"t{i}" for i in range(distinct)]
    b = [*a[::2], "stranger", *a[1::2], "another"]
    coded = lcs._as_codes(a, b)
    assert coded is not None and isinstance(coded[0], kind) and isinstance(coded[1], kind)
    expected = distinct // 2 + 1
    assert lcs_length_rapidfuzz(a, b) == lcs_length_rapidfuzz(b, a) == lcs_length_dp(a, b) == expected


def test_distinct_tokens_with_equal_hashes_do_not_match() -> None:
    # 0 and 2**61 - 1 hash alike in CPython (the modulus), as do -1 and -2: rapidfuzz keys the items of a
    # list by their hash and would count these as matches; the codes go through dict equality.
    zero, modulus = 0, 2**61 - 1
    assert hash(zero) == hash(modulus) and hash(-1) == hash(-2)
    a = [zero, "x", -1, "y"]
    b = [modulus, "x", -2, "y", zero]
    assert lcs_length(a, b) == lcs_length_dp(a, b) == 2
    assert LcsSource(b).lcs_length(a) == 2


def test_a_shorter_vocabulary_beyond_unicode_takes_the_pure_python_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # 400 distinct tokens need characters (more than a byte's 255); with only 300 code points they do not fit.
    monkeypatch.setattr(lcs, "MAX_CODE_POINT", 300)
    a = [f"t{i}" for i in range(400)]
    b = [*a[::-1], *a]
    assert lcs._as_codes(a, b) is None
    assert lcs_length_rapidfuzz(a, b) == lcs_length_bits(a, b) == 400


# LcsSource: one source coded once for many texts.


def test_lcs_source_matches_dp_before_and_after_it_codes_the_source() -> None:
    rng = random.Random(23)
    for _ in range(60):
        alphabet = rng.randint(1, 30)
        source = [f"w{rng.randrange(alphabet)}" for _ in range(rng.randint(0, 150))]
        prepared = LcsSource(source)
        measured = 0  # texts that count towards coding the source (an empty text or source counts none)
        for _ in range(lcs.PREPARE_AFTER + 3):
            text = [f"w{rng.randrange(alphabet + 5)}" for _ in range(rng.randint(0, 60))]
            assert prepared.lcs_length(text) == lcs_length_dp(text, source), (text, source)
            measured += bool(text and source)
            assert prepared.prepared == (measured > lcs.PREPARE_AFTER)
        assert len(prepared) == len(source)


def test_lcs_source_codes_only_after_its_first_texts() -> None:
    source = tokenize("the cat sat on the mat and the dog sat on the log")
    prepared = LcsSource(source)
    texts = [tokenize("the cat on the log"), tokenize("a dog sat"), tokenize("mat mat the"), tokenize("zebra")]
    found = []
    for text in texts:
        found.append(prepared.lcs_length(text))
        assert prepared.prepared == (len(found) > lcs.PREPARE_AFTER)
    assert found == [5, 2, 2, 0] == [lcs_length_dp(text, source) for text in texts]
    assert prepared.lcs_length([]) == 0
    assert LcsSource([]).lcs_length(texts[0]) == 0


def test_lcs_source_on_a_real_source_shared_by_its_twelve_systems(rose_examples: list[dict]) -> None:
    for example in rose_examples[:3]:
        source = tokenize(example["source"])
        prepared = LcsSource(source)
        summaries = [tokenize(summary) for summary in example["system_outputs"].values()]
        assert len(summaries) == 12
        for summary in summaries:
            expected = _lcs_table(source, summary)[-1][-1]
            assert prepared.lcs_length(summary) == lcs_length_bits(summary, source) == expected
        assert prepared.prepared
        assert prepared.lcs_length(source) == len(source)


def test_lcs_source_beyond_unicode_keeps_measuring(monkeypatch: pytest.MonkeyPatch) -> None:
    # Fewer code points than the source's distinct tokens: coding stops short, and every text is measured
    # through lcs_length instead.
    monkeypatch.setattr(lcs, "MAX_CODE_POINT", 3)
    source = list("abcdefab")
    prepared = LcsSource(source)
    assert prepared.prepare() is False
    assert [prepared.lcs_length(text) for text in ("ab", "fab", "xyz", "bad")] == [2, 3, 0, 2]
    assert not prepared.prepared


def test_lcs_source_without_rapidfuzz(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lcs, "_similarity", None)
    prepared = LcsSource("BDCABA")
    assert prepared.prepare() is False
    uses = lcs.PREPARE_AFTER + 2
    assert [prepared.lcs_length("ABCBDAB") for _ in range(uses)] == [4] * uses
    assert not prepared.prepared


def test_lcs_length_without_rapidfuzz_uses_the_bit_parallel_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lcs, "_similarity", None)
    assert lcs_length("ABCBDAB", "BDCABA") == 4
    with pytest.raises(RuntimeError):
        lcs_length_rapidfuzz("a", "a")


# lcs_length picks rapidfuzz on the token lists for small pairs of str tokens and the codes otherwise
# (bench/lcs.py); both must give the length a plain dynamic programme gives.


def _reference_lcs(a: list, b: list) -> int:
    """The textbook table, written out here so that no path of scoring.core.lcs checks itself."""
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a, start=1):
        for j, y in enumerate(b, start=1):
            table[i][j] = table[i - 1][j - 1] + 1 if x == y else max(table[i - 1][j], table[i][j - 1])
    return table[-1][-1]


def test_both_one_off_paths_match_a_plain_table_on_random_token_lists() -> None:
    rng = random.Random(29)
    for _ in range(300):
        vocabulary = [f"t{i}" for i in range(rng.choice((1, 2, 5, 20, 300, 2000)))] + ["a", "é", "日本"]
        a = rng.choices(vocabulary, k=rng.randint(0, 80))
        b = rng.choices(vocabulary, k=rng.randint(0, 400))
        expected = _reference_lcs(a, b)
        assert lcs.lcs_length_lists(a, b) == expected, (a, b)
        assert lcs_length_rapidfuzz(a, b) == lcs_length_rapidfuzz(b, a) == expected, (a, b)
        assert lcs_length(a, b) == lcs_length(b, a) == expected, (a, b)


@pytest.mark.parametrize("cells", [0, 10**9])
def test_lcs_length_on_either_side_of_the_crossover_matches_a_plain_table(
    monkeypatch: pytest.MonkeyPatch, rose_examples: list[dict], cells: int
) -> None:
    # The bound moved to either end sends every pair down one path, so each path is checked on real pairs
    # (CNN/DailyMail summaries against their articles: about 60 x 700 tokens).
    monkeypatch.setattr(lcs, "LIST_PATH_MAX_CELLS", cells)
    for example in rose_examples[:3]:
        source = tokenize(example["source"])
        for summary in list(example["system_outputs"].values())[:3]:
            tokens = tokenize(summary)
            expected = _reference_lcs(tokens, source)
            assert lcs_length(tokens, source) == lcs_length(source, tokens) == expected


def test_items_that_are_not_all_str_are_refused_by_the_list_path() -> None:
    # rapidfuzz would key these by hash, and hash(0) == hash(2**61 - 1): lcs_length takes the codes instead.
    assert lcs.lcs_length_lists([0, "x"], [2**61 - 1, "x"]) is None
    assert lcs.lcs_length_lists(["x", b"y"], ["x"]) is None
    assert lcs_length([0, "x"], [2**61 - 1, "x"]) == 1
