"""The lead-k and TextRank baselines: what a reader expects of each, on hand-built sources."""

from __future__ import annotations

import math
import re
from collections import Counter

import pytest

from generation.baselines import BASELINES, BaselineSummariser, textrank_similarity
from generation.offline_summariser import split_cited, uncite
from generation.registry import generation_models, get_generation_backend
from kernel.backends import BackendError, Document, GenerationRequest
from kernel.text import split_sentences

from .conftest import NURSE, PERSONAS

SUMMARISER = BaselineSummariser()


def _doc(n: int, abstract: str) -> Document:
    return Document(external_id=f"W{n}", title=f"Paper {n}", abstract=abstract)


# Five sources; each opens with a sentence naming its own topic.
LEAD_DOCS = [
    _doc(1, "Night shifts shorten the sleep of hospital nurses. A second sentence about rosters follows."),
    _doc(2, "Caffeine late in the day delays sleep onset. Later we discuss tea."),
    _doc(3, "Bright light at night shifts the body clock. The effect fades within days."),
    _doc(4, "Patient safety on the ward suffers when nurses are tired. Medication errors rise at night."),
    _doc(5, "Nurses on the ward report fewer patient safety incidents after naps. Naps were twenty minutes."),
]


def _generate(documents: list[Document], model: str, persona=None, **settings) -> list[tuple[str, int]]:
    text = SUMMARISER.generate(
        GenerationRequest(query="q", documents=documents, prompt="p", model=model, persona=persona, settings=settings)
    ).text
    return [uncite(sentence) for sentence in split_cited(text)]


def test_lead_k_takes_the_opening_sentence_of_each_top_source():
    assert _generate(LEAD_DOCS, "lead-k") == [
        ("Night shifts shorten the sleep of hospital nurses.", 1),
        ("Caffeine late in the day delays sleep onset.", 2),
        ("Bright light at night shifts the body clock.", 3),
    ]
    assert _generate(LEAD_DOCS, "lead-k", k=2, sentences_per_source=2) == [
        ("Night shifts shorten the sleep of hospital nurses.", 1),
        ("A second sentence about rosters follows.", 1),
        ("Caffeine late in the day delays sleep onset.", 2),
        ("Later we discuss tea.", 2),
    ]


def test_lead_k_with_a_nurse_persona_takes_the_sources_about_her_ward():
    # Sources 4 and 5 speak of patients, the ward and nurses; 1 of hospital nurses; 3 of shifts only, 2 of none.
    cited = [rank for _, rank in _generate(LEAD_DOCS, "lead-k", persona=NURSE)]
    assert set(cited) == {1, 4, 5}
    assert cited == sorted(cited)


# A hand-built graph (stemmed content words in brackets). The first sentence shares two words with each of
# the next two [night, shift] and [nurs, sleep], which share none with each other; the bananas share nothing.
TEXTRANK_DOCS = [
    _doc(1, "Nurses sleep poorly after night shifts. Bananas are yellow fruit."),
    _doc(2, "Night shifts disturb the body clock. Tired nurses sleep during the day."),
]


def test_textrank_similarity_is_shared_words_over_log_lengths():
    a = Counter({"nurs": 1, "sleep": 1, "poor": 1, "night": 1, "shift": 1})
    b = Counter({"tired": 1, "nurs": 1, "sleep": 1, "day": 1})
    assert textrank_similarity(a, b) == pytest.approx(2 / (math.log(5) + math.log(4)))
    assert textrank_similarity(a, Counter({"banana": 1, "yellow": 1, "fruit": 1})) == 0.0


def test_textrank_picks_the_central_sentences_and_leaves_the_unconnected_one():
    # Room for one sentence: the hub. Room for three: the hub and its two neighbours, never the bananas.
    assert _generate(TEXTRANK_DOCS, "textrank", max_sentences=1) == [("Nurses sleep poorly after night shifts.", 1)]
    chosen = _generate(TEXTRANK_DOCS, "textrank", max_sentences=3)
    assert [text for text, _ in chosen] == [
        "Nurses sleep poorly after night shifts.",
        "Night shifts disturb the body clock.",
        "Tired nurses sleep during the day.",
    ]


def test_persona_biased_textrank_favours_sentences_about_the_reader():
    # "Sleep research uses actigraphy" is the hub (3 words shared with the ward sentence, 2 with the home one,
    # and the shortest); the ward sentence is nearly as central and is the only one about a nurse's work.
    documents = [
        _doc(1, "Sleep research uses actigraphy. Actigraphy measures sleep at home."),
        _doc(2, "Nurses on the hospital ward use actigraphy to track patient sleep."),
    ]
    assert _generate(documents, "textrank", max_sentences=1) == [("Sleep research uses actigraphy.", 1)]
    assert _generate(documents, "textrank", persona=NURSE, max_sentences=1) == [
        ("Nurses on the hospital ward use actigraphy to track patient sleep.", 2)
    ]


@pytest.mark.parametrize("model", BASELINES)
def test_every_sentence_is_copied_from_the_abstract_it_cites(retrieved, model):
    for documents in retrieved.values():
        for persona in (None, NURSE):
            sentences = _generate(documents, model, persona)
            assert sentences
            for text, rank in sentences:
                assert text in split_sentences(documents[rank - 1].abstract, fold=False)
            again = _generate(documents, model, persona)
            assert again == sentences  # deterministic


def test_registry_serves_the_baselines_and_refuses_bad_input():
    assert generation_models("baseline") == ["lead-k", "textrank"]
    backend = get_generation_backend("baseline")
    request = GenerationRequest(query="q", documents=LEAD_DOCS, prompt="p", model="lead-5")
    with pytest.raises(BackendError, match="Unknown baseline model 'lead-5'; choose one of lead-k, textrank"):
        backend.generate(request)
    with pytest.raises(BackendError, match="k=.x. is not a number"):
        _generate(LEAD_DOCS, "lead-k", k="x")
    with pytest.raises(BackendError, match="at least 1"):
        _generate(LEAD_DOCS, "lead-k", k=0)
    with pytest.raises(BackendError, match="empty"):
        _generate([_doc(1, "")], "textrank")


# Words a practising nurse looks for, written out here rather than taken from the backend's lexicon.
NURSE_WORDS = frozenset(
    "patient patients care clinical practice staff ward wards nurse nurses hospital hospitals managers safety".split()
)


def _text(documents, model, persona=None) -> str:
    request = GenerationRequest(query="q", documents=documents, prompt="p", model=model, persona=persona)
    return SUMMARISER.generate(request).text


def test_biased_textrank_brings_the_nurses_concerns_into_the_summary(retrieved):
    def count(text: str) -> int:
        return sum(word in NURSE_WORDS for word in re.findall(r"[a-z]+", text.lower()))

    generic = sum(count(_text(documents, "textrank")) for documents in retrieved.values())
    personal = sum(count(_text(documents, "textrank", NURSE)) for documents in retrieved.values())
    assert personal > generic


@pytest.mark.parametrize("model", BASELINES)
def test_personalised_baselines_mostly_differ_from_generic(retrieved, model):
    # A persona and a generic summary shown side by side should rarely be the same text.
    pairs = [
        (_text(documents, model), _text(documents, model, persona))
        for documents in retrieved.values()
        for persona in PERSONAS.values()
    ]
    assert sum(generic != personal for generic, personal in pairs) >= 0.75 * len(pairs)


@pytest.mark.parametrize("model", BASELINES)
def test_an_abstract_without_sentence_breaks_is_cut_to_the_length_budget_and_cited(model):
    # A pasted table of 4,000 cells and no sentence break (some 80,000 characters), then an ordinary source.
    table = "Sepsis outcomes by ward: " + " ".join(f"ward {i} mortality {i % 17}%," for i in range(4000))
    documents = [_doc(1, table), _doc(2, "Sepsis mortality fell on every ward. Fluids helped.")]
    cited = _generate(documents, model, max_words=40)
    opening, rank = cited[0]
    assert rank == 1
    assert opening.endswith("\u2026") and table.startswith(opening.removesuffix("\u2026"))
    assert len(opening.split()) == 40
