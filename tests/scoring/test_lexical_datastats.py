"""Lexical metrics agree with the libraries called directly; DataStats on a hand-worked example."""

from __future__ import annotations

import pytest
import sacrebleu
from nltk.translate.meteor_score import meteor_score
from rouge_score import rouge_scorer

from kernel.text import tokenize
from scoring.core import lexical
from scoring.core.api import metric_specs, score_rows
from scoring.core.datastats import datastats, extractive_fragments


def test_rouge_bleu_chrf_match_the_libraries(scitldr_rows: list[dict]) -> None:
    rows = scitldr_rows[:25]
    scored = score_rows(rows, ["rouge1", "rouge2", "rougeL", "bleu", "chrf"])
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    for row, out in zip(rows, scored, strict=True):
        expected = scorer.score(row["reference"], row["summary"])
        for name in ("rouge1", "rouge2", "rougeL"):
            assert out[name] == pytest.approx(expected[name].fmeasure)
        bleu = sacrebleu.sentence_bleu(row["summary"], [row["reference"]], smooth_method="exp")
        assert out["bleu"] == pytest.approx(bleu.score / 100)
        assert out["chrf"] == pytest.approx(sacrebleu.sentence_chrf(row["summary"], [row["reference"]]).score / 100)
        assert out["errors"] == {}
    # Real TLDR pairs differ: the scores are not all identical or all zero.
    assert len({round(o["rouge1"], 6) for o in scored}) > 10


@pytest.mark.parametrize(
    ("summary", "reference", "expected"),
    [
        # The same words in Cyrillic and in Greek: a perfect match (rouge-score's own tokens: none, 0.0).
        ("Врачи проверяют упражнения", "Врачи проверяют упражнения", 1.0),
        ("Οι γιατροί ελέγχουν τις ασκήσεις", "Οι γιατροί ελέγχουν τις ασκήσεις", 1.0),
        # Size and greetings share no word (rouge-score's tokens: "gr e" on both sides, 1.0).
        ("Größe", "Grüße", 0.0),
        # One word of two in common, "Übungen" (rouge-score's tokens: "ber bungen" in "bungen berpr ft", 0.8).
        ("Über Übungen", "Übungen überprüft", 0.5),
    ],
    ids=["russian", "greek", "german-no-common-word", "german-one-common-word"],
)
def test_rouge_reads_words_of_every_script(summary: str, reference: str, expected: float) -> None:
    scored = score_rows([{"id": "x", "summary": summary, "reference": reference}], ["rouge1", "rougeL"])[0]
    assert scored["rouge1"] == pytest.approx(expected)
    assert scored["rougeL"] == pytest.approx(expected)


def test_meteor_without_wordnet_uses_exact_and_stem_matches_only() -> None:
    if lexical.wordnet_available():
        pytest.skip("WordNet is installed here, so the synonym stage is on")
    assert lexical.METEOR_VARIANT == "exact+stem"
    spec = metric_specs(["meteor"])[0]
    assert "exact+stem" in spec.version and "WordNet is not installed" in spec.description
    # Stems match ("running" ~ "runs"); a WordNet synonym ("quick" ~ "fast") does not.
    assert lexical.meteor("the dog runs fast", "the dog running fast") > lexical.meteor(
        "the dog runs quick", "the dog running fast"
    )
    hyp, ref = "the cats were running home", "a cat runs home"

    class NoSynonyms:
        def synsets(self, word: str) -> list:
            return []

    assert lexical.meteor(hyp, ref) == pytest.approx(
        meteor_score([tokenize(ref)], tokenize(hyp), wordnet=NoSynonyms())  # type: ignore[arg-type]
    )


def test_datastats_hand_worked_example() -> None:
    source = "alpha beta gamma delta epsilon zeta"
    summary = "alpha beta gamma xi delta epsilon"
    result = datastats(summary, source)
    assert result.fragments == (("alpha", "beta", "gamma"), ("delta", "epsilon"))
    assert result.coverage == pytest.approx(5 / 6)
    assert result.density == pytest.approx((9 + 4) / 6)
    assert result.compression == pytest.approx(6 / 6)
    assert result.novel_1gram == pytest.approx(1 / 6)  # xi
    assert result.novel_2gram == pytest.approx(2 / 5)  # (gamma xi), (xi delta)
    assert result.novel_3gram == pytest.approx(3 / 4)
    assert result.summary_length == 6


def test_fragments_take_the_longest_match_not_the_first() -> None:
    assert extractive_fragments(["a", "b", "c"], ["a", "b", "a", "b", "c"]) == [("a", "b", "c")]
    result = datastats("a b c", "a b a b c")
    assert result.density == pytest.approx(3.0)


def test_datastats_separates_extractive_from_abstractive_real_summaries(rose_examples: list[dict]) -> None:
    # RoSE system "matchsum" is extractive (copies sentences); its density is far above the reference's.
    rows = []
    for example in rose_examples[:10]:
        rows.append({"id": "ext", "summary": example["system_outputs"]["matchsum"], "source": example["source"]})
        rows.append({"id": "ref", "summary": example["reference"], "source": example["source"]})
    scored = score_rows(rows, ["density", "coverage", "novel_2gram"])
    extractive = [r for r in scored if r["id"] == "ext"]
    reference = [r for r in scored if r["id"] == "ref"]
    assert min(r["coverage"] for r in extractive) > 0.95
    assert sum(r["density"] for r in extractive) > 2 * sum(r["density"] for r in reference)
    assert sum(r["novel_2gram"] for r in extractive) < sum(r["novel_2gram"] for r in reference)
