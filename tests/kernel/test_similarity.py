"""Identical and near-identical texts (kernel.similarity), with similarities counted by hand: one word
changed among n is 2 token edits over 2n tokens, a similarity of 100 * (1 - 1/n)."""

from __future__ import annotations

from kernel.similarity import NEAR_IDENTICAL_THRESHOLD, likeness


def words(n: int, *, changed: int | None = None) -> str:
    return " ".join("other" if i == changed else f"word{i}" for i in range(n))


def test_equal_once_case_whitespace_and_punctuation_are_folded():
    assert likeness("Night shifts, in short: worse sleep [1].", "night  shifts in short worse SLEEP 1") == (
        likeness("a", "a")
    )
    assert likeness("Night shifts.", "night shifts").kind == "exact"
    assert likeness("Night shifts.", "night shifts").similarity == 100.0


def test_one_word_in_ten_is_near_identical_and_one_in_nine_is_not():
    assert NEAR_IDENTICAL_THRESHOLD == 90.0
    ten = likeness(words(10), words(10, changed=3))
    assert (ten.kind, ten.similarity) == ("near", 90.0)
    nine = likeness(words(9), words(9, changed=3))
    assert (nine.kind, nine.similarity) == ("", 88.89)
    assert likeness(words(20), words(20, changed=0)).similarity == 95.0


def test_different_texts_and_a_stricter_threshold():
    assert likeness("rotas matter", "naps help").kind == ""
    assert likeness(words(20), words(20, changed=0), threshold=96).kind == ""
