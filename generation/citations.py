"""Check a summary's bracketed citations against the number of retrieved sources.

A summary should cite the numbered abstracts it was given as [1]..[n]. This flags one that
cites a number that does not exist or cites nothing at all. Plain Python, no Django.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# One bracket: numbers, optionally prefixed ("Source 2", "Abstract 3"), separated by commas,
# semicolons or "and", or a range "2-4" / "2–4". "[Table 1]" or "[0.5]" are not citations.
_BRACKET = re.compile(
    r"\[\s*((?:(?:source|abstract|paper|doc(?:ument)?|ref(?:erence)?)s?\s*)?\d+"
    r"(?:\s*(?:[,;]|and|[-–—])\s*(?:(?:source|abstract|paper|doc(?:ument)?|ref(?:erence)?)s?\s*)?\d+)*)\s*\]",
    re.IGNORECASE,
)
_RANGE = re.compile(r"(\d+)\s*[-–—]\s*(\d+)")
_NUMBER = re.compile(r"\d+")
_MAX_RANGE = 50


@dataclass(frozen=True)
class CitationCheck:
    """Which source numbers a summary cites and what is wrong with them."""

    n_sources: int
    cited: tuple[int, ...]
    nonexistent: tuple[int, ...]

    @property
    def cites_none(self) -> bool:
        return not self.cited

    @property
    def ok(self) -> bool:
        return bool(self.cited) and not self.nonexistent

    @property
    def problems(self) -> tuple[str, ...]:
        out = []
        if self.cites_none:
            out.append("cites no source")
        if self.nonexistent:
            listed = ", ".join(f"[{n}]" for n in self.nonexistent)
            out.append(f"cites {listed}, but only [1]..[{self.n_sources}] exist")
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "cites_none": self.cites_none,
            "cited": list(self.cited),
            "nonexistent": list(self.nonexistent),
            "n_sources": self.n_sources,
            "problems": list(self.problems),
        }


def cited_numbers(text: str) -> tuple[int, ...]:
    """Every source number cited in `text`, in order of first appearance."""
    seen: dict[int, None] = {}
    for match in _BRACKET.finditer(text):
        body = match.group(1)
        for start, end in _RANGE.findall(body):
            lo, hi = int(start), int(end)
            # An implausible range ("[1-1000]") counts only its two ends.
            span = range(lo, hi + 1) if lo <= hi and hi - lo <= _MAX_RANGE else (lo, hi)
            for n in span:
                seen.setdefault(n, None)
        for number in _NUMBER.findall(_RANGE.sub(" ", body)):
            seen.setdefault(int(number), None)
    return tuple(seen)


def check_citations(text: str, n_sources: int) -> CitationCheck:
    """Flag citations of sources outside 1..n_sources, and a summary that cites none."""
    cited = cited_numbers(text)
    return CitationCheck(
        n_sources=n_sources,
        cited=cited,
        nonexistent=tuple(n for n in cited if not 1 <= n <= n_sources),
    )
