"""BERTScore-style and sentence-cosine metrics on the bundled MiniLM (optional embeddings extra)."""

from __future__ import annotations

from typing import Any

import pytest

from scoring.core.api import score_rows
from scoring.core.embeddings import bertscore, sentence_cosine
from scoring.core.source_free import pseudo_reference, supert

pytestmark = pytest.mark.embeddings


def test_identical_texts_match_perfectly(embedding_model: Any) -> None:
    text = "The model improves summarisation faithfulness on long scientific documents."
    (score,) = bertscore([text], [text], model=embedding_model)
    assert score.precision == pytest.approx(1.0, abs=1e-4)
    assert score.f1 == pytest.approx(1.0, abs=1e-4)
    assert sentence_cosine([text], [text], model=embedding_model)[0] == pytest.approx(1.0, abs=1e-4)


def test_paraphrase_beats_unrelated_text(embedding_model: Any) -> None:
    reference = "A cat was sitting on a mat in the kitchen."
    candidates = ["The cat sat on the kitchen mat.", "Stock markets fell sharply on Tuesday after the report."]
    close, far = bertscore(candidates, [reference, reference], model=embedding_model)
    assert close.f1 > far.f1 + 0.05
    cos_close, cos_far = sentence_cosine(candidates, [reference, reference], model=embedding_model)
    assert cos_close > cos_far + 0.3


def test_long_texts_are_chunked_not_truncated(embedding_model: Any) -> None:
    filler = " ".join(f"The committee discussed item {i} of the annual budget." for i in range(80))
    tail = "A giraffe played the xylophone at the zoo."
    text = f"{filler} {tail}"
    pieces = embedding_model._tokenizer.tokenize(text)
    assert len(pieces) > 600  # well past the 256-piece window
    (vectors,) = embedding_model.token_embeddings([text])
    assert vectors.shape == (len(pieces), 384)
    # The last sentence of a long reference is still visible to greedy matching: against the
    # whole text it matches far better than against the filler alone (what truncation keeps).
    whole, filler_only = bertscore([tail, tail], [text, filler], model=embedding_model)
    assert whole.precision > filler_only.precision + 0.15


def test_score_rows_embedding_and_supert_on_scitldr(embedding_model: Any, scitldr_rows: list[dict]) -> None:
    rows = scitldr_rows[:4]
    names = ["bertscore_p", "bertscore_r", "bertscore_f1", "embedding_cosine", "supert"]
    scored = score_rows(rows, names)
    for row in scored:
        assert row["errors"] == {}
        for name in names:
            assert 0.0 < row[name] <= 1.0001
        assert (
            min(row["bertscore_p"], row["bertscore_r"])
            <= row["bertscore_f1"]
            <= max(row["bertscore_p"], row["bertscore_r"])
        )
    # SUPERT rewards a summary taken from the source over one from another paper.
    own = " ".join(rows[0]["source"][:2])
    other = " ".join(rows[1]["source"][:2])
    source = " ".join(rows[0]["source"])
    mine, theirs = supert([own, other], [source, source], model=embedding_model, k=3)
    assert mine > theirs


def test_pseudo_reference_keeps_central_sentences_in_document_order(embedding_model: Any) -> None:
    sentences = [
        "Neural summarisation models produce fluent summaries.",
        "Bananas are rich in potassium.",
        "Summaries from neural models can contain unsupported facts.",
        "Evaluation of summarisation models needs faithfulness metrics.",
    ]
    chosen = pseudo_reference(" ".join(sentences), model=embedding_model, k=3)
    assert "Bananas" not in chosen
    assert chosen.index("fluent") < chosen.index("unsupported") < chosen.index("faithfulness")


def test_unavailable_model_is_a_per_row_reason(embedding_model: Any) -> None:
    rows = [{"id": i, "summary": "a cat", "reference": "a dog"} for i in range(3)]
    scored = score_rows(rows, ["bertscore_f1", "rouge1"], embedding_model="/nonexistent/encoder")
    for row in scored:
        assert row["bertscore_f1"] is None and row["rouge1"] is not None
        assert row["errors"]["bertscore_f1"].startswith("embedding model /nonexistent/encoder is unavailable offline")
