"""The text kernel: the tokeniser, the sentence splitter, the stop words, the stemmer and the analyser."""

from __future__ import annotations

import math

import pytest

from kernel.bm25 import BM25Index
from kernel.text import (
    STOP_WORDS,
    CorpusTermStats,
    content_words,
    count_words,
    cut_words,
    fold_whitespace,
    index_terms,
    question_coverage,
    sentence_spans,
    split_cjk,
    split_sentences,
    stem,
    tokenize,
    weighted_question_coverage,
)


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


def test_spans_are_exact_substrings_and_folding_is_a_separate_step() -> None:
    text = "  First   sentence\n  spans lines.  Second one (e.g. this) ends here!\n\n\tThird  "
    spans = sentence_spans(text)
    exact = [text[a:b] for a, b in spans]
    assert exact == ["First   sentence\n  spans lines.", "Second one (e.g. this) ends here!", "Third"]
    assert split_sentences(text, fold=False) == exact
    assert split_sentences(text) == [fold_whitespace(s) for s in exact]
    assert split_sentences(text)[0] == "First sentence spans lines."
    assert sentence_spans("") == [] and split_sentences(" \n\n ") == []


def test_stop_words_are_function_words_and_question_boilerplate() -> None:
    assert {"the", "of", "please", "tell", "et", "al"} <= STOP_WORDS
    assert not {"care", "model", "patient", "nurse"} & STOP_WORDS
    assert content_words("Please tell me about the care of a patient") == ["care", "patient"]
    assert content_words("a b cd", min_length=2) == ["cd"]
    assert content_words("COVID-19 and state-of-the-art", pattern=r"[\w-]+") == ["covid-19", "state-of-the-art"]


def test_stem_folds_the_forms_that_meet_in_abstracts_and_queries() -> None:
    assert {stem(w) for w in ("nurse", "nurses", "nursing")} == {"nurs"}
    assert stem("vaccine") == stem("vaccination") == "vaccin"
    assert stem("evaluated") == stem("evaluation") == stem("evaluate")
    assert stem("studies") == "study" and stem("2020") == "2020" and stem("bus") == "bus"


def test_index_terms_compose_tokenize_stop_words_and_stem() -> None:
    text = "How do night shifts affect nurses' sleep? A 2x effect, e.g. in Zürich."
    expected = [stem(t) for t in tokenize(text) if t not in STOP_WORDS and len(t) > 1]
    assert index_terms(text) == expected
    assert index_terms(text) == ["night", "shift", "affect", "nurs", "sleep", "2x", "effect", "zürich"]


def test_question_coverage_counts_the_questions_content_words_found_in_the_text() -> None:
    # Content words of three letters or more: best, early, treatment, sepsis, emergency, department (6);
    # the text has "treatments" (one stem with "treatment") and "early".
    question = "What is the best early treatment for sepsis in the emergency department?"
    assert question_coverage(question, "Early stopping for estimating treatments in trials.") == 2 / 6
    assert question_coverage("Nurses on night shifts", "A night shift nurse.") == 1.0
    assert question_coverage("Is it so?", "anything") is None  # no content word of three letters


def test_chinese_and_japanese_sentences_end_at_full_width_stops() -> None:
    text = "夜班会减少睡眠。疲劳的护士更容易出错！应该如何安排？ 研究建议少上夜班。\n\n「疲れ」は事故につながる。彼は「はい」と言った」。End."
    assert split_sentences(text) == [
        "夜班会减少睡眠。",
        "疲劳的护士更容易出错！",
        "应该如何安排？",
        "研究建议少上夜班。",
        "「疲れ」は事故につながる。",
        "彼は「はい」と言った」。",
        "End.",
    ]


def test_words_are_counted_and_cut_with_han_and_kana_one_word_each() -> None:
    assert count_words("Night  shifts,\tnurses.") == 3 == len("Night  shifts,\tnurses.".split())
    assert count_words("夜班会减少睡眠。") == 7 + 1  # seven characters and the stop
    assert count_words("See 夜勤 twice") == 4
    assert cut_words("one two, three four", 2) == "one two\u2026"
    assert cut_words("one two three", 3) == "one two three"
    assert cut_words("one two three  ", 3) == "one two three  "
    assert cut_words("夜班会减少睡眠。", 3) == "夜班会\u2026"


def test_korean_words_are_counted_by_spaces() -> None:
    # Hangul is written with spaces between words, so a Korean word is not split into its syllables.
    assert count_words("야간 근무는 간호사의 수면을 줄인다.") == 5
    assert cut_words("야간 근무는 간호사의 수면을 줄인다.", 2) == "야간 근무는\u2026"


def test_a_run_without_spaces_counts_one_word_per_25_characters() -> None:
    # The longest word of the demo corpus, 25 characters, is still one word: English counts do not change.
    assert count_words("a difference-in-differences design") == 3
    assert count_words("x" * 26) == 2
    assert count_words("y" * 50) == 2
    assert count_words("z" * 10_000) == 400
    url = "https://github.com/google-research/episodic-curiosity/"  # 54 characters: 25 + 25 + 4
    assert count_words(f"Code: {url} (MIT).") == 1 + 3 + 1
    dna = "ACGT" * 2500
    # Cut after the third word: "Reads:" and the first two 25-character pieces of the sequence.
    assert cut_words(f"Reads: {dna} end.", 3) == "Reads: " + "ACGT" * 12 + "AC\u2026"
    # A cut never separates a letter from its combining accent (e + U+0301 is two characters).
    accented = "e\u0301" * 20
    assert count_words(accented) == 2
    assert cut_words(f"{accented} tail", 1) == "e\u0301" * 12 + "\u2026"


def test_split_cjk_gives_each_han_or_kana_character_on_its_own() -> None:
    assert tokenize("夜班abc会减少。") == ["夜班abc会减少"]  # the default token runs across scripts
    assert split_cjk("夜班abc会减少") == ["夜", "班", "abc", "会", "减", "少"]
    assert split_cjk("patients") == ["patients"]


# The "no matching sources" warning's weighted coverage (issue 33): four abstracts, "study" in all of them.
ABSTRACTS = ["Nurses sleep: a study", "Shift work: a study", "Vaccine study", "Robots study"]


def test_document_frequencies_counted_from_texts_and_read_off_the_bm25_index_agree() -> None:
    counted = CorpusTermStats.from_texts(ABSTRACTS)
    indexed = BM25Index([index_terms(text) for text in ABSTRACTS]).term_stats()
    assert counted.n_documents == indexed.n_documents == 4
    for term, df in {"study": 4, "shift": 1, "nurses": 1, "vaccine": 1, "harm": 0}.items():
        assert counted.document_frequency(stem(term)) == indexed.document_frequency(stem(term)) == df, term


def test_weighted_coverage_weighs_words_by_idf_and_leaves_out_words_in_most_abstracts() -> None:
    corpus = CorpusTermStats.from_texts(ABSTRACTS)
    once, never = math.log(1 + 3.5 / 1.5), math.log(1 + 4.5 / 0.5)  # BM25's idf at df 1 and df 0 of N = 4
    # "study" is in all four abstracts: left out. shift and work found; sleep (in one abstract) and harm (in none) not.
    share = weighted_question_coverage("Does shift work harm sleep in a study", ["Shift work: a study"], corpus)
    assert share == pytest.approx(2 * once / (3 * once + never))
    # A long question is judged by its best sentence: the framing around it, which nothing holds, does not count.
    framed = "I am writing a report for my manager today. Does shift work harm sleep in a study?"
    assert weighted_question_coverage(framed, ["Shift work: a study"], corpus) == pytest.approx(share)
    assert weighted_question_coverage("The study.", ["anything"], corpus) is None  # only a word every abstract has
