"""RA / SA / AR against hand-computed values and the SPEC formulas; the risk bands at their edges."""

from __future__ import annotations

import pytest

from kernel.text import tokenize
from scoring.core.abstractiveness import (
    EPSILON,
    abstractiveness,
    harmonic_mean,
    overlap,
    risk_band,
    risk_code,
)
from scoring.core.api import score_rows
from scoring.core.lcs import LcsSource

SOURCE = "The cat sat on the mat today."  # O = 7
REFERENCE = "The cat sat quietly."  # R = 4
SUMMARY = "A dog sat on the mat."  # S = 6


def test_hand_computed_example() -> None:
    result = abstractiveness(SOURCE, REFERENCE, SUMMARY)
    assert (result.source_words, result.reference_words, result.summary_words) == (7, 4, 6)
    hm_r, hm_s = 2 * 4 * 7 / 11, 2 * 6 * 7 / 13
    # unigrams: reference shares the/cat/sat (3 of 4); summary shares sat/on/the/mat (4 of 6)
    assert result.unigram.c_reference == pytest.approx(3 / 4)
    assert result.unigram.c_summary == pytest.approx(4 / 6)
    assert result.unigram.ra == pytest.approx(hm_r * (1 / 4) ** 3)
    assert result.unigram.sa == pytest.approx(hm_s * (1 / 3) ** 3)
    assert result.unigram.ar == pytest.approx((1 / 3) ** 3 / ((1 / 4) ** 3 + EPSILON))
    # bigrams: reference (the cat)(cat sat) of 3; summary (sat on)(on the)(the mat) of 5
    assert result.bigram.c_reference == pytest.approx(2 / 3)
    assert result.bigram.c_summary == pytest.approx(3 / 5)
    assert result.bigram.ra == pytest.approx(56 / 297)
    assert result.bigram.sa == pytest.approx(hm_s * 0.4**3)
    assert result.bigram.ar == pytest.approx(0.064 * 27, rel=1e-6)
    # LCS: "the cat sat" (3 of 4) and "sat on the mat" (4 of 6)
    assert result.lcs.c_reference == pytest.approx(3 / 4)
    assert result.lcs.c_summary == pytest.approx(4 / 6)
    assert result.ar_risk == "moderate"  # bigram AR = 1.728


def test_overlap_is_a_multiset_intersection() -> None:
    source = tokenize("the cat and the dog")
    assert overlap(["the", "the", "the"], source, "1") == pytest.approx(2 / 3)
    assert overlap(tokenize("the cat the cat"), tokenize("the cat"), "2") == pytest.approx(1 / 3)


def test_copy_of_source_scores_zero_abstraction_and_novel_text_scores_hm() -> None:
    copied = abstractiveness(SOURCE, REFERENCE, SOURCE)
    assert copied.unigram.sa == 0 and copied.bigram.sa == 0 and copied.lcs.sa == 0
    novel = abstractiveness(SOURCE, REFERENCE, "Completely unrelated words here")
    assert novel.unigram.sa == pytest.approx(harmonic_mean(4, 7))
    # A fully extractive reference makes the denominator epsilon, not a division by zero.
    extractive_ref = abstractiveness(SOURCE, "the cat sat on the mat", SUMMARY)
    assert extractive_ref.bigram.ar == pytest.approx(0.4**3 / EPSILON)
    assert extractive_ref.ar_risk == "high"


@pytest.mark.parametrize(
    ("ar", "band", "code"),
    [
        (2.0000001, "high", 3),
        (2.0, "moderate", 2),
        (1.2000001, "moderate", 2),
        (1.2, "balanced", 1),
        (1.0, "balanced", 1),
        (0.8, "balanced", 1),
        (0.7999999, "extractive", 0),
        (0.0, "extractive", 0),
    ],
)
def test_risk_bands_at_boundaries(ar: float, band: str, code: int) -> None:
    assert risk_band(ar) == band
    assert risk_code(ar) == code


def test_score_rows_gives_ten_outputs_and_explains_undefined_bigrams() -> None:
    names = ["ra_1", "sa_1", "ar_1", "ra_2", "sa_2", "ar_2", "ra_lcs", "sa_lcs", "ar_lcs", "ar_risk"]
    rows = [
        {"id": "ok", "source": SOURCE, "reference": REFERENCE, "summary": SUMMARY},
        {"id": "one-word", "source": SOURCE, "reference": REFERENCE, "summary": "Cat."},
    ]
    ok, short = score_rows(rows, names)
    expected = abstractiveness(SOURCE, REFERENCE, SUMMARY).as_metrics()
    assert {name: ok[name] for name in names} == pytest.approx(expected)
    assert ok["ar_risk"] == 2.0 and ok["errors"] == {}
    # One token: unigram and LCS are defined, bigram overlap is not.
    assert short["ra_1"] is not None and short["ar_lcs"] is not None
    for name in ("ra_2", "sa_2", "ar_2", "ar_risk"):
        assert short[name] is None
        assert "bigram overlap is undefined: the summary has 1 token" in short["errors"][name]


def test_score_rows_lcs_on_a_source_shared_by_many_summaries_matches_the_hand_computed_overlaps() -> None:
    # score_rows keeps one LcsSource per source text, which codes the source after its first texts: the
    # later rows take the coded path. Every row's LCS overlap is hand-computed against the source.
    source = "The cat sat on the mat on a sunny afternoon today."  # O = 11, a text no other test scores
    summaries = {
        "A dog sat on the mat.": 4 / 6,  # sat on the mat
        "The cat sat.": 3 / 3,
        "Mat the on sat cat the.": 3 / 6,  # "the on the" (or "the cat the", "the sat the")
        "Nothing here matches.": 0 / 3,
        "The cat on a sunny afternoon.": 6 / 6,
        "Today the mat.": 2 / 3,  # the mat
    }
    reference = "The cat sat quietly."  # R = 4: "the cat sat", 3 of 4
    rows = [
        {"id": str(i), "source": source, "reference": reference, "summary": summary}
        for i, summary in enumerate(summaries)
    ]
    scored = score_rows(rows, ["sa_lcs", "ra_lcs", "ar_lcs"])
    hm_r = 2 * 4 * 11 / 15
    for row, (summary, c_s) in zip(scored, summaries.items(), strict=True):
        hm_s = 2 * len(tokenize(summary)) * 11 / (len(tokenize(summary)) + 11)
        assert row["sa_lcs"] == pytest.approx(hm_s * (1 - c_s) ** 3), summary
        assert row["ra_lcs"] == pytest.approx(hm_r * (1 / 4) ** 3), summary
        assert row["ar_lcs"] == pytest.approx((1 - c_s) ** 3 / ((1 / 4) ** 3 + EPSILON)), summary


@pytest.mark.parametrize(
    ("x", "y", "hm"),
    [(0, 0, 0.0), (3, 3, 3.0), (0.5, 0.5, 0.5), (1, 0, 0.0), (4, 7, 56 / 11), (2.0, 6.0, 3.0)],
)
def test_harmonic_mean_by_hand_with_its_edges(x: float, y: float, hm: float) -> None:
    # HM(x, y) = 2xy / (x + y); HM(0, 0) is 0, not a division by zero; HM(x, x) = x.
    assert harmonic_mean(x, y) == pytest.approx(hm)
    assert harmonic_mean(y, x) == pytest.approx(hm)


def test_overlap_refuses_texts_without_a_unit_with_a_message() -> None:
    source = tokenize(SOURCE)
    for granularity in ("1", "lcs"):
        with pytest.raises(ValueError, match=r"^no tokens$"):
            overlap([], source, granularity)
    with pytest.raises(ValueError, match=r"^fewer than two tokens, so no bigrams$"):
        overlap(["cat"], source, "2")
    with pytest.raises(ValueError, match=r"^unknown granularity '3'$"):
        overlap(["cat", "sat"], source, "3")  # type: ignore[arg-type]


def test_two_tokens_make_one_bigram() -> None:
    source = tokenize(SOURCE)
    assert overlap(["the", "cat"], source, "2") == 1.0
    assert overlap(["cat", "the"], source, "2") == 0.0
    assert overlap(["the", "cat", "ran"], source, "2") == pytest.approx(1 / 2)


def test_lcs_overlap_with_a_prepared_source_equals_the_plain_one() -> None:
    source = tokenize(SOURCE)
    prepared = LcsSource(source)
    for text in (["sat", "on", "the", "mat"], ["mat", "the", "on", "sat"], ["dog"]):
        assert overlap(text, source, "lcs", lcs_source=prepared) == overlap(text, source, "lcs")
    assert overlap(["mat", "the", "on", "sat"], source, "lcs") == pytest.approx(2 / 4)  # "the mat" / "on ..."


def test_empty_texts_are_refused_by_name() -> None:
    for empty in ("source", "reference", "summary"):
        texts = {"source": SOURCE, "reference": REFERENCE, "summary": SUMMARY, empty: " . "}
        with pytest.raises(ValueError, match=rf"^{empty} has no tokens$"):
            abstractiveness(texts["source"], texts["reference"], texts["summary"])


def test_summary_table_shows_the_hand_computed_figures() -> None:
    # Unigram: RA = HM(4, 7) (1/4)^3 = 0.0795, SA = HM(6, 7) (1/3)^3 = 0.2393, AR = 64/27 = 2.3704.
    # Bigram: RA = 56/297 = 0.1886, SA = HM(6, 7) 0.4^3 = 0.4135, AR = 1.728. LCS equals unigram here.
    assert abstractiveness(SOURCE, REFERENCE, SUMMARY).summary().splitlines() == [
        "O=7 R=4 S=6",
        "unit         c_R     c_S        RA        SA        AR",
        "1          0.750   0.667     0.080     0.239    2.3704",
        "2          0.667   0.600     0.189     0.414    1.7280",
        "lcs        0.750   0.667     0.080     0.239    2.3704",
        "risk (bigram AR): moderate",
    ]
