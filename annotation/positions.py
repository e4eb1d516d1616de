"""Bracket positions and the letters of match labels (A, B, ... then AA, AB, ...; ``round1_ab``, ``round4_a-p``),
shared by the tournament and the attention checks that imitate its labels."""

from __future__ import annotations

import string
from collections.abc import Sequence

from studies.models import MAX_BRACKET_SIZE as MAX_BRACKET_SIZE  # the largest bracket: A to Z, then AA to AF


def position_name(index: int) -> str:
    """The bracket position of the `index`-th candidate in bracket order: A, B, ..., Z, then AA, AB, ..."""
    letters = string.ascii_uppercase
    if index < len(letters):
        return letters[index]
    return letters[index // len(letters) - 1] + letters[index % len(letters)]


def span_label(positions: Sequence[str]) -> str:
    """The letters of a match's label for the positions its span holds, lower case: written out (``abcd``)
    while they are single letters and at most eight of them, as in every bracket of up to 16 systems; else the
    first and the last (``a-p``, ``y-ab``), which keeps a label short and unambiguous in a bracket of up to 32."""
    if len(positions) <= 8 and all(len(p) == 1 for p in positions):
        return "".join(positions).lower()
    return f"{positions[0]}-{positions[-1]}".lower()
