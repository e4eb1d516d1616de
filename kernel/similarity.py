"""How alike two summaries are, for the identical-candidates policy (docs/annotators.md): exact once case,
whitespace and punctuation are folded, or near-identical by token-level similarity. Pure: no Django."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz

from kernel.text import tokenize

NEAR_IDENTICAL_THRESHOLD = 90.0
"""Token-level similarity (0-100, rapidfuzz's normalised Indel similarity over word tokens) at or above which
two different texts count as near-identical: one word changed in a 20-word summary scores 95, one in ten 90."""


@dataclass(frozen=True)
class Likeness:
    """``kind`` is ``"exact"``, ``"near"`` or ``""`` (different); ``similarity`` is 0 to 100."""

    kind: str
    similarity: float


def likeness(first: str, second: str, *, threshold: float = NEAR_IDENTICAL_THRESHOLD) -> Likeness:
    """Compare two texts as word tokens (``kernel.text.tokenize``: lower-cased, punctuation dropped)."""
    return token_likeness(tokenize(first), tokenize(second), threshold=threshold)


def token_likeness(a: Sequence[str], b: Sequence[str], *, threshold: float = NEAR_IDENTICAL_THRESHOLD) -> Likeness:
    """``likeness`` of texts already tokenised (to compare many pairs, tokenise each text once)."""
    if list(a) == list(b):
        return Likeness("exact", 100.0)
    similarity = round(float(fuzz.ratio(a, b)), 2)
    return Likeness("near" if similarity >= threshold else "", similarity)
