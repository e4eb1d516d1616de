"""Reference-free, source-based metrics: SUPERT-style, BLANC-help and SummaQA.

* SUPERT-style (Gao et al., 2020) runs offline on the embedding model: the
  pseudo-reference is the source's most central sentences (highest mean cosine to
  the other sentences, kept in document order), and the score is the BERTScore-style
  F1 of greedy token alignment between summary and pseudo-reference.
* BLANC-help (Vasilyev et al., 2020) needs the masked language model ``bert-base-uncased``
  and SummaQA (Scialom et al., 2019) needs the SQuAD QA model
  ``bert-large-uncased-whole-word-masking-finetuned-squad`` and spaCy's ``en_core_web_sm``
  for its entity cloze questions. Their loaders are real and use only local files; on a
  machine without those weights they fail with "model X is unavailable offline".
"""

from __future__ import annotations

import collections
import importlib
import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from kernel.text import split_sentences, tokenize
from scoring.core.embeddings import EmbeddingModel, greedy_match, load_model

__all__ = [
    "BLANC_MODEL",
    "SUMMAQA_QA_MODEL",
    "SUMMAQA_NER_MODEL",
    "BlancResult",
    "ModelUnavailable",
    "SummaQAResult",
    "TransformersMaskedLM",
    "blanc_help",
    "load_masked_lm",
    "load_summaqa",
    "pseudo_reference",
    "summaqa",
    "supert",
]

BLANC_MODEL = "bert-base-uncased"
SUMMAQA_QA_MODEL = "bert-large-uncased-whole-word-masking-finetuned-squad"
SUMMAQA_NER_MODEL = "en_core_web_sm"


class ModelUnavailable(RuntimeError):
    """Model weights needed by a metric are not on this machine; ``str()`` is the reason."""


# -- SUPERT-style -----------------------------------------------------------------------


def pseudo_reference(source: str, *, model: EmbeddingModel, k: int = 10) -> str:
    """The ``k`` most central source sentences (mean cosine to all sentences), in document order."""
    sentences = split_sentences(source)
    if len(sentences) <= k:
        return " ".join(sentences)
    vectors = model.encode(sentences)
    centrality = (vectors @ vectors.T).mean(axis=1)
    keep = sorted(np.argsort(-centrality, kind="stable")[:k].tolist())
    return " ".join(sentences[i] for i in keep)


def supert(
    summaries: Sequence[str], sources: Sequence[str], *, model: EmbeddingModel | None = None, k: int = 10
) -> list[float]:
    """SUPERT-style F1 of each summary against its source's pseudo-reference."""
    encoder = model or load_model()
    references: dict[str, str] = {}
    for source in sources:
        if source not in references:
            references[source] = pseudo_reference(source, model=encoder, k=k)
    embedded = encoder.token_embeddings([*summaries, *(references[s] for s in sources)])
    n = len(summaries)
    return [greedy_match(embedded[i], embedded[n + i]).f1 for i in range(n)]


# -- model loading ----------------------------------------------------------------------

_failures: dict[str, str] = {}
_loaded: dict[str, Any] = {}
_load_lock = threading.Lock()


def _offline_load(key: str, loader: Callable[[], Any], what: str) -> Any:
    with _load_lock:
        if key in _loaded:
            return _loaded[key]
        if key in _failures:
            raise ModelUnavailable(_failures[key])
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            value = loader()
        except Exception as exc:  # missing package, missing weights, no network: all say the same to a user
            detail = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            _failures[key] = f"model {what} is unavailable offline ({detail[:200]})"
            raise ModelUnavailable(_failures[key]) from exc
        _loaded[key] = value
        return value


# -- BLANC-help -------------------------------------------------------------------------


class MaskedLM(Protocol):
    """What BLANC needs from a masked language model."""

    mask_token: str

    def tokenize(self, text: str) -> list[str]: ...

    def fill(self, context: Sequence[str], masked: Sequence[str]) -> list[str]:
        """Top-1 prediction for every mask token in ``masked``, given ``context`` before it."""
        ...


class TransformersMaskedLM:
    """A Hugging Face masked LM as BLANC uses it: ``[CLS] context [SEP] masked sentence [SEP]``."""

    def __init__(self, name: str = BLANC_MODEL, *, max_length: int = 512) -> None:
        def load() -> tuple[Any, Any]:
            transformers = importlib.import_module("transformers")
            tokenizer = transformers.AutoTokenizer.from_pretrained(name, local_files_only=True)
            model = transformers.AutoModelForMaskedLM.from_pretrained(name, local_files_only=True)
            model.eval()
            return tokenizer, model

        self._tokenizer, self._model = _offline_load(f"mlm:{name}", load, name)
        self.mask_token = str(self._tokenizer.mask_token)
        self.max_length = max_length

    def tokenize(self, text: str) -> list[str]:
        return list(self._tokenizer.tokenize(text))

    def fill(self, context: Sequence[str], masked: Sequence[str]) -> list[str]:
        import torch  # the optional embeddings extra, seconds to import

        tok = self._tokenizer
        budget = self.max_length - len(masked) - 3
        pieces = [tok.cls_token, *list(context)[: max(budget, 0)], tok.sep_token, *masked, tok.sep_token]
        ids = torch.tensor([tok.convert_tokens_to_ids(pieces)])
        with torch.inference_mode():
            logits = self._model(input_ids=ids).logits[0]
        offset = len(pieces) - len(masked) - 1
        positions = [offset + i for i, piece in enumerate(masked) if piece == self.mask_token]
        predicted = logits[positions].argmax(dim=-1).tolist()
        return [str(t) for t in tok.convert_ids_to_tokens(predicted)]


def load_masked_lm(name: str = BLANC_MODEL) -> TransformersMaskedLM:
    """The masked LM for BLANC, from local files only (ModelUnavailable otherwise)."""
    return TransformersMaskedLM(name)


@dataclass(frozen=True)
class BlancResult:
    """BLANC-help and its contingency counts over masked tokens (help right/wrong x base right/wrong)."""

    score: float
    help_only: int
    base_only: int
    both: int
    neither: int


def _eligible(piece: str, min_length: int) -> bool:
    # Whole words of some length only, as BLANC does: sub-word continuations and short words are never masked.
    return not piece.startswith("##") and len(piece) >= min_length and any(c.isalnum() for c in piece)


def blanc_help(
    summary: str,
    source: str,
    *,
    lm: MaskedLM | None = None,
    gap: int = 6,
    min_token_length: int = 4,
) -> BlancResult:
    """BLANC-help: how much reading the summary helps a masked LM fill in masked source words.

    Each source sentence is masked ``gap`` times (every gap-th eligible word, shifted
    by one each time); the LM fills it with the summary as context ("help") and with
    a filler of periods of the same length ("base"). Score = (help_only - base_only) / total.
    """
    model = lm or load_masked_lm()
    summary_pieces = model.tokenize(summary)
    filler = ["."] * len(summary_pieces)
    counts = collections.Counter[str]()
    for sentence in split_sentences(source):
        pieces = model.tokenize(sentence)
        eligible = [i for i, p in enumerate(pieces) if _eligible(p, min_token_length)]
        for shift in range(gap):
            targets = [i for n, i in enumerate(eligible) if n % gap == shift]
            if not targets:
                continue
            masked = [model.mask_token if i in targets else p for i, p in enumerate(pieces)]
            with_help = model.fill(summary_pieces, masked)
            base = model.fill(filler, masked)
            for index, helped, unhelped in zip(targets, with_help, base, strict=True):
                truth = pieces[index]
                key = ("h" if helped == truth else "-") + ("b" if unhelped == truth else "-")
                counts[key] += 1
    total = sum(counts.values())
    if total == 0:
        raise ValueError(f"the source has no words of at least {min_token_length} characters to mask")
    return BlancResult(
        score=(counts["h-"] - counts["-b"]) / total,
        help_only=counts["h-"],
        base_only=counts["-b"],
        both=counts["hb"],
        neither=counts["--"],
    )


# -- SummaQA ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SummaQAResult:
    """SummaQA: mean answer F1 and mean answer probability over the source's cloze questions."""

    f1: float
    probability: float
    questions: int


def _answer_tokens(text: str) -> list[str]:
    # SQuAD's answer normalisation: lower-case, articles dropped, punctuation split off.
    return tokenize(re.sub(r"\b(a|an|the)\b", " ", text.lower()))


def answer_f1(prediction: str, truth: str) -> float:
    """SQuAD-style token F1 between a predicted answer and the true answer."""
    predicted, gold = _answer_tokens(prediction), _answer_tokens(truth)
    common = sum((collections.Counter(predicted) & collections.Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


class _SummaQAModels:
    def __init__(self, qa: Any, ner: Any) -> None:
        self.qa = qa
        self.ner = ner


def load_summaqa(qa_model: str = SUMMAQA_QA_MODEL, ner_model: str = SUMMAQA_NER_MODEL) -> _SummaQAModels:
    """The QA pipeline and spaCy NER model SummaQA uses, from local files only."""

    def load_qa() -> Any:
        transformers = importlib.import_module("transformers")
        tokenizer = transformers.AutoTokenizer.from_pretrained(qa_model, local_files_only=True)
        model = transformers.AutoModelForQuestionAnswering.from_pretrained(qa_model, local_files_only=True)
        return transformers.pipeline("question-answering", model=model, tokenizer=tokenizer, device=-1)

    def load_ner() -> Any:
        spacy = importlib.import_module("spacy")
        return spacy.load(ner_model)

    reasons: list[str] = []
    loaded: list[Any] = []
    for key, loader, what in ((f"qa:{qa_model}", load_qa, qa_model), (f"ner:{ner_model}", load_ner, ner_model)):
        try:
            loaded.append(_offline_load(key, loader, what))
        except ModelUnavailable as exc:
            reasons.append(str(exc))
    if reasons:
        raise ModelUnavailable("; ".join(reasons))
    return _SummaQAModels(loaded[0], loaded[1])


def summaqa(summary: str, source: str, *, models: _SummaQAModels | None = None) -> SummaQAResult:
    """SummaQA: mask each named entity of the source in turn and answer the cloze question from the summary."""
    loaded = models or load_summaqa()
    questions: list[tuple[str, str]] = []
    for sentence in loaded.ner(source).sents:
        for entity in sentence.ents:
            start, end = entity.start_char - sentence.start_char, entity.end_char - sentence.start_char
            text = sentence.text
            questions.append((text[:start] + "[MASK]" + text[end:], entity.text))
    if not questions:
        raise ValueError("the source has no named entities to ask about")
    f1s: list[float] = []
    probabilities: list[float] = []
    for question, truth in questions:
        answer = loaded.qa(question=question, context=summary)
        f1s.append(answer_f1(str(answer["answer"]), truth))
        probabilities.append(float(answer["score"]))
    return SummaQAResult(f1=float(np.mean(f1s)), probability=float(np.mean(probabilities)), questions=len(questions))
