"""Lexical reference-based metrics: ROUGE-1/2/L, BLEU, chrF, METEOR.

Each wraps the reference implementation (rouge-score, sacrebleu, nltk) so numbers
match those libraries; all are reported on a 0-1 scale (sacrebleu's 0-100 divided
by 100). METEOR runs with WordNet synonyms only when nltk's wordnet corpus is
installed; this machine cannot download it, so by default METEOR matches exact
words and Porter stems only, and its version string says which variant ran.
"""

from __future__ import annotations

import functools
from typing import Any

import nltk
from nltk.corpus import wordnet
from nltk.stem.porter import PorterStemmer
from nltk.translate.meteor_score import meteor_score
from rouge_score import rouge_scorer
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.metrics.chrf import CHRF

from kernel.text import tokenize

__all__ = [
    "METEOR_VARIANT",
    "RougeTokenizer",
    "bleu",
    "chrf",
    "meteor",
    "rouge",
    "wordnet_available",
]


class RougeTokenizer:
    """rouge-score's tokeniser with the letters and digits of every script.

    rouge-score keeps only ``[a-z0-9]``: a Russian or Greek text has no token at all (ROUGE 0 even
    against itself) and a German word falls apart at its umlauts ("Größe" and "Grüße" both read
    ``gr e``, a perfect match). On ASCII text the tokens are the package's own (lower-case runs of
    letters and digits, Porter stems of tokens longer than 3 characters), so English numbers still
    match the published package.
    """

    def tokenize(self, text: str) -> list[str]:
        stemmer = _stemmer()
        return [stemmer.stem(token) if len(token) > 3 else token for token in tokenize(text)]


@functools.cache
def _rouge() -> rouge_scorer.RougeScorer:
    return rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], tokenizer=RougeTokenizer())


def rouge(summary: str, reference: str) -> dict[str, float]:
    """ROUGE-1, ROUGE-2 and ROUGE-L F1 (rouge-score with Porter stemming, on :class:`RougeTokenizer`'s tokens)."""
    scores = _rouge().score(reference, summary)
    return {name: float(scores[name].fmeasure) for name in ("rouge1", "rouge2", "rougeL")}


@functools.cache
def _bleu() -> Any:
    return BLEU(effective_order=True)


@functools.cache
def _chrf() -> Any:
    return CHRF()


def bleu(summary: str, reference: str) -> float:
    """Sentence-level BLEU (sacrebleu, 13a tokeniser, exponential smoothing, effective order) / 100."""
    return float(_bleu().sentence_score(summary, [reference]).score) / 100.0


def chrf(summary: str, reference: str) -> float:
    """Sentence-level chrF (sacrebleu, character 6-grams, beta 2) / 100."""
    return float(_chrf().sentence_score(summary, [reference]).score) / 100.0


@functools.cache
def wordnet_available() -> bool:
    """True when nltk's WordNet corpus is installed locally (it is never downloaded here)."""
    try:
        nltk.data.find("corpora/wordnet")
    except LookupError:
        try:
            nltk.data.find("corpora/wordnet.zip")
        except LookupError:
            return False
    return True


class _NoSynonyms:
    """Stands in for the WordNet reader: no synonyms, so METEOR's synonym stage matches nothing new."""

    def synsets(self, word: str) -> list[Any]:
        return []


METEOR_VARIANT = "exact+stem+wordnet" if wordnet_available() else "exact+stem"


@functools.cache
def _stemmer() -> PorterStemmer:
    return PorterStemmer()


def meteor(summary: str, reference: str) -> float:
    """METEOR (nltk ``meteor_score``) over lower-case alphanumeric tokens.

    Without a local WordNet corpus the synonym stage is disabled (exact and stem
    matches only), which can only lower scores relative to full METEOR.
    """
    hypothesis = tokenize(summary)
    ref = tokenize(reference)
    if wordnet_available():
        return float(meteor_score([ref], hypothesis, stemmer=_stemmer(), wordnet=wordnet))
    return float(meteor_score([ref], hypothesis, stemmer=_stemmer(), wordnet=_NoSynonyms()))
