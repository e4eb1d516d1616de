"""Tokenisation and sentence splitting shared by every metric in the core.

The default token is a maximal run of Unicode letters or digits, lower-cased
("Don't stop-gap 2.5x" -> don, t, stop, gap, 2, 5x). Metrics that wrap a library
(rouge-score, sacrebleu) keep that library's own tokeniser so their numbers match
the published implementations; docs/metrics.md lists which metric uses which.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

__all__ = [
    "TOKEN_PATTERN",
    "ngram_counts",
    "ngrams",
    "split_sentences",
    "tokenize",
]

TOKEN_PATTERN = r"[^\W_]+"  # noqa: S105 - a regular expression, not a secret
_COMPILED: dict[str, re.Pattern[str]] = {}

# Abbreviations whose trailing period does not end a sentence.
_ABBREVIATIONS = frozenset(
    {
        "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "etc", "al", "fig", "figs",
        "eq", "eqs", "ref", "refs", "sec", "no", "vol", "pp", "approx", "inc", "ltd", "co", "corp",
        "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
        "gen", "gov", "sen", "rep", "col", "lt", "capt", "sgt", "e.g", "i.e", "cf", "u.s", "u.k",
    }
)  # fmt: skip
# A candidate boundary: terminal punctuation, optional closing quotes/brackets, whitespace.
_BOUNDARY = re.compile(r"([.!?\u2026]+[\"'\u201d\u2019)\]]*)\s+")
_PARAGRAPH = re.compile(r"\n\s*\n")


def _pattern(pattern: str) -> re.Pattern[str]:
    compiled = _COMPILED.get(pattern)
    if compiled is None:
        compiled = _COMPILED[pattern] = re.compile(pattern)
    return compiled


def tokenize(text: str, *, lowercase: bool = True, pattern: str = TOKEN_PATTERN) -> list[str]:
    """Split ``text`` into word tokens.

    Default: lower-case alphanumeric tokens (maximal runs of Unicode letters and
    digits; punctuation and underscores separate tokens). ``lowercase=False``
    keeps case; ``pattern`` is any regular expression whose matches are tokens.
    """
    if lowercase:
        text = text.lower()
    return _pattern(pattern).findall(text)


def _ends_with_abbreviation(chunk: str) -> bool:
    words = chunk.rstrip().split()
    if not words:
        return False
    last = words[-1].rstrip(".!?\u2026\"'\u201d\u2019)]").lstrip("(\"'\u201c\u2018[").lower()
    if last in _ABBREVIATIONS:
        return True
    # Single initials ("J. K. Rowling") do not end sentences.
    return len(last) == 1 and last.isalpha()


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences with a rule-based splitter (no model data needed).

    Breaks at blank lines and after ``.``, ``!``, ``?`` or an ellipsis (with any
    closing quotes or brackets) followed by whitespace and a capital letter, digit,
    quote or bracket. Common abbreviations (Dr., e.g., et al.) and single initials
    do not end a sentence. Whitespace inside a sentence is collapsed; empty
    sentences are dropped.
    """
    sentences: list[str] = []
    for paragraph in _PARAGRAPH.split(text):
        start = 0
        pieces: list[str] = []
        for match in _BOUNDARY.finditer(paragraph):
            nxt = paragraph[match.end() : match.end() + 1]
            if not nxt or not (nxt.isupper() or nxt.isdigit() or nxt in "\"'\u201c\u2018([-"):
                continue
            candidate = paragraph[start : match.end(1)]
            if _ends_with_abbreviation(candidate) and match.group(1) == ".":
                continue
            pieces.append(candidate)
            start = match.end()
        pieces.append(paragraph[start:])
        for piece in pieces:
            cleaned = " ".join(piece.split())
            if cleaned:
                sentences.append(cleaned)
    return sentences


def ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    """All contiguous n-grams of ``tokens`` in order (empty when there are fewer than n)."""
    if n <= 0:
        raise ValueError("n must be positive")
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def ngram_counts(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    """Multiset of the n-grams of ``tokens``."""
    return Counter(ngrams(tokens, n))


def join_sentences(sentences: Iterable[str]) -> str:
    """Join sentences with single spaces (the inverse of :func:`split_sentences` up to whitespace)."""
    return " ".join(s.strip() for s in sentences if s.strip())
