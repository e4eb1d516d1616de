"""BLANC-help's accounting with a scripted masked LM, and the plain reasons when weights are not here."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kernel.text import split_sentences
from scoring.core.api import score_rows
from scoring.core.source_free import (
    BLANC_MODEL,
    SUMMAQA_QA_MODEL,
    ModelUnavailable,
    answer_f1,
    blanc_help,
    load_masked_lm,
)


class ReadingLM:
    """Fills a mask with the true word exactly when that word appears in the context it was given."""

    mask_token = "[MASK]"

    def __init__(self, source: str) -> None:
        self.truth = {tuple(self.tokenize(s)): self.tokenize(s) for s in split_sentences(source)}
        self.calls = 0

    def tokenize(self, text: str) -> list[str]:
        return text.lower().replace(".", " .").split()

    def fill(self, context: Sequence[str], masked: Sequence[str]) -> list[str]:
        self.calls += 1
        original = next(t for t in self.truth.values() if len(t) == len(masked) and all(
            m == self.mask_token or m == w for m, w in zip(masked, t, strict=True)))  # fmt: skip
        return [w if w in context else "[UNK]" for m, w in zip(masked, original, strict=True) if m == self.mask_token]


def test_blanc_help_counts_words_the_summary_helps_to_fill() -> None:
    source = "Researchers measured glacier retreat across northern Canada. Temperatures rose quickly during summer"
    # Eligible words (>= 4 characters): researchers measured glacier retreat across northern canada,
    # temperatures rose quickly during summer -> 12 masked; the summary contains five of them.
    summary = "Glacier retreat measured during summer."
    lm = ReadingLM(source)
    result = blanc_help(summary, source, lm=lm, gap=3, min_token_length=4)
    assert result.help_only == 5 and result.base_only == 0
    assert result.help_only + result.both + result.neither + result.base_only == 12
    assert result.score == pytest.approx(5 / 12)
    assert lm.calls == 2 * 3 * 2  # two sentences x three mask shifts x (help, base)
    # An unrelated summary does not help at all.
    assert blanc_help("Bananas are yellow.", source, lm=ReadingLM(source), gap=3).score == 0.0


def test_masked_lm_loader_fails_with_a_plain_reason() -> None:
    with pytest.raises(ModelUnavailable, match=r"model /nonexistent/bert-base-uncased is unavailable offline"):
        load_masked_lm("/nonexistent/bert-base-uncased")


def _cached(repo_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)


def test_blanc_and_summaqa_report_missing_weights_per_row() -> None:
    if _cached(BLANC_MODEL) or _cached(SUMMAQA_QA_MODEL):
        pytest.skip("the BLANC/SummaQA weights are in the local Hugging Face cache on this machine")
    rows = [{"id": 1, "summary": "Glaciers retreat.", "source": "Glaciers in Canada retreat. Ice melts."}]
    (out,) = score_rows(rows, ["blanc_help", "summaqa_f1", "summaqa_prob"])
    assert out["blanc_help"] is None
    assert out["errors"]["blanc_help"].startswith(f"model {BLANC_MODEL} is unavailable offline")
    assert f"model {SUMMAQA_QA_MODEL} is unavailable offline" in out["errors"]["summaqa_f1"]
    assert out["errors"]["summaqa_prob"] == out["errors"]["summaqa_f1"]


def test_squad_answer_f1() -> None:
    assert answer_f1("the Canadian Arctic", "Canadian Arctic") == 1.0
    assert answer_f1("northern Canada", "Canada") == pytest.approx(2 / 3)
    assert answer_f1("nothing", "Canada") == 0.0
