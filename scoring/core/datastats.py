"""DataStats (Grusky et al., 2018): extractive fragment coverage, density and compression.

Extractive fragments are found greedily: walking the summary left to right, take at
each position the longest token span that also occurs contiguously in the source,
and move past it (a token with no match advances by one). With F the fragments,
coverage = sum|f| / |S|, density = sum|f|^2 / |S|, compression = |A| / |S|.
Novel n-gram shares count distinct summary n-grams absent from the source.
Tokens are :func:`kernel.text.tokenize` (the paper used spaCy tokens).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kernel.text import ngrams, tokenize

__all__ = ["DataStatsResult", "datastats", "datastats_from_tokens", "extractive_fragments"]


def extractive_fragments(summary: Sequence[str], source: Sequence[str]) -> list[tuple[str, ...]]:
    """Greedy extractive fragments of ``summary`` in ``source`` (Grusky et al.'s algorithm).

    Candidate starts come from a token -> source positions index, so the search
    costs O(sum over summary positions of the matched lengths) rather than a full
    scan of the source per summary token.
    """
    where: dict[str, list[int]] = {}
    for j, token in enumerate(source):
        where.setdefault(token, []).append(j)
    fragments: list[tuple[str, ...]] = []
    i, n_summary, n_source = 0, len(summary), len(source)
    while i < n_summary:
        best = 0
        resume_at = -1  # the original algorithm continues scanning after the end of a match
        for j in where.get(summary[i], ()):
            if j < resume_at:
                continue
            length = 0
            while i + length < n_summary and j + length < n_source and summary[i + length] == source[j + length]:
                length += 1
            best = max(best, length)
            resume_at = j + length
        if best:
            fragments.append(tuple(summary[i : i + best]))
        i += max(best, 1)
    return fragments


@dataclass(frozen=True)
class DataStatsResult:
    """Grusky et al.'s summary statistics plus novel n-gram shares and length."""

    coverage: float
    density: float
    compression: float
    novel_1gram: float
    novel_2gram: float
    novel_3gram: float
    summary_length: int
    fragments: tuple[tuple[str, ...], ...]

    def as_metrics(self) -> dict[str, float]:
        """The registry outputs (fragments omitted)."""
        return {
            "coverage": self.coverage,
            "density": self.density,
            "compression": self.compression,
            "novel_1gram": self.novel_1gram,
            "novel_2gram": self.novel_2gram,
            "novel_3gram": self.novel_3gram,
            "summary_length": float(self.summary_length),
        }


def novel_ngram_share(summary: Sequence[str], source: Sequence[str], n: int) -> float:
    """Share of distinct summary n-grams that never occur in the source (0 when the summary has none)."""
    summary_set = set(ngrams(summary, n))
    if not summary_set:
        return 0.0
    return len(summary_set - set(ngrams(source, n))) / len(summary_set)


def datastats_from_tokens(summary: Sequence[str], source: Sequence[str]) -> DataStatsResult:
    """DataStats of tokenised texts; ValueError when the summary is empty."""
    if not summary:
        raise ValueError("summary has no tokens")
    fragments = extractive_fragments(summary, source)
    n = len(summary)
    return DataStatsResult(
        coverage=sum(len(f) for f in fragments) / n,
        density=sum(len(f) ** 2 for f in fragments) / n,
        compression=len(source) / n,
        novel_1gram=novel_ngram_share(summary, source, 1),
        novel_2gram=novel_ngram_share(summary, source, 2),
        novel_3gram=novel_ngram_share(summary, source, 3),
        summary_length=n,
        fragments=tuple(fragments),
    )


def datastats(summary: str, source: str, *, tokenizer: Callable[[str], list[str]] = tokenize) -> DataStatsResult:
    """DataStats of raw texts, tokenised with ``tokenizer``."""
    return datastats_from_tokens(tokenizer(summary), tokenizer(source))
