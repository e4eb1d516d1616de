"""Abstractiveness of a summary against its source: RA, SA, AR and the AR risk bands.

Implements SPEC section 3 (seed 000). O, R, S are the word counts of source,
reference and generated summary; the overlap c of a text with the source is
measured at three granularities:

* unigram: |multiset(text tokens) & multiset(source tokens)| / len(text tokens)
* bigram:  |multiset(text bigrams) & multiset(source bigrams)| / number of text bigrams
* lcs:     LCS(text tokens, source tokens) / len(text tokens)

RA = HM(R, O) (1 - c_R)^3, SA = HM(S, O) (1 - c_S)^3, AR = (1 - c_S)^3 / ((1 - c_R)^3 + 1e-8),
with HM(x, y) = 2xy / (x + y). Tokens are :func:`kernel.text.tokenize` (lower-case
alphanumeric by default); pass ``tokenizer`` to change that.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from kernel.text import ngram_counts, tokenize
from scoring.core.lcs import LcsSource, lcs_length

__all__ = [
    "EPSILON",
    "GRANULARITIES",
    "RISK_BANDS",
    "AbstractivenessResult",
    "GranularityScores",
    "abstractiveness",
    "abstractiveness_from_tokens",
    "granularity_scores",
    "harmonic_mean",
    "overlap",
    "risk_band",
    "risk_code",
]

EPSILON = 1e-8
Granularity = Literal["1", "2", "lcs"]
GRANULARITIES: tuple[Granularity, ...] = ("1", "2", "lcs")
RiskBand = Literal["extractive", "balanced", "moderate", "high"]
# Ordinal codes used where only floats fit (score_rows' ``ar_risk``): higher = more hallucination risk.
RISK_BANDS: dict[int, RiskBand] = {0: "extractive", 1: "balanced", 2: "moderate", 3: "high"}
_RISK_CODES: dict[RiskBand, int] = {band: code for code, band in RISK_BANDS.items()}


def harmonic_mean(x: float, y: float) -> float:
    """HM(x, y) = 2xy / (x + y); 0 when both are 0."""
    return 0.0 if x + y == 0 else 2.0 * x * y / (x + y)


def overlap(
    text: Sequence[str], source: Sequence[str], granularity: Granularity, *, lcs_source: LcsSource | None = None
) -> float:
    """Normalised overlap c of ``text`` tokens with ``source`` tokens, in [0, 1].

    ``lcs_source``: ``source`` already prepared for the LCS (``LcsSource(source)``), when several texts
    are measured against one source. Raises ValueError when ``text`` has no unit at that granularity (no
    tokens, or fewer than two tokens for bigrams): the ratio is undefined, not zero.
    """
    if granularity == "1":
        if not text:
            raise ValueError("no tokens")
        common_units = Counter(text) & Counter(source)
        return sum(common_units.values()) / len(text)
    if granularity == "2":
        if len(text) < 2:
            raise ValueError("fewer than two tokens, so no bigrams")
        text_bigrams = ngram_counts(text, 2)
        common = text_bigrams & ngram_counts(source, 2)
        return sum(common.values()) / (len(text) - 1)
    if granularity == "lcs":
        if not text:
            raise ValueError("no tokens")
        found = lcs_source.lcs_length(text) if lcs_source is not None else lcs_length(text, source)
        return found / len(text)
    raise ValueError(f"unknown granularity {granularity!r}")


def risk_band(ar: float) -> RiskBand:
    """Seed 000's four bands on bigram AR: >2 high, (1.2, 2] moderate, [0.8, 1.2] balanced, <0.8 extractive.

    Seed 001's three-band scheme merges "balanced" and "extractive" as "low".
    """
    if ar > 2.0:
        return "high"
    if ar > 1.2:
        return "moderate"
    if ar >= 0.8:
        return "balanced"
    return "extractive"


def risk_code(ar: float) -> int:
    """The band of :func:`risk_band` as an ordinal code (0 extractive, 1 balanced, 2 moderate, 3 high)."""
    return _RISK_CODES[risk_band(ar)]


@dataclass(frozen=True)
class GranularityScores:
    """RA, SA, AR and the two overlaps at one granularity."""

    granularity: Granularity
    c_reference: float
    c_summary: float
    ra: float
    sa: float
    ar: float


@dataclass(frozen=True)
class AbstractivenessResult:
    """Everything the abstractiveness paper reports for one (source, reference, summary) triple."""

    source_words: int  # O
    reference_words: int  # R
    summary_words: int  # S
    unigram: GranularityScores
    bigram: GranularityScores
    lcs: GranularityScores

    @property
    def ar_risk(self) -> RiskBand:
        """Risk band on bigram AR (seed 000's four bands)."""
        return risk_band(self.bigram.ar)

    def as_metrics(self) -> dict[str, float]:
        """The ten registry outputs (``ar_risk`` as its ordinal code)."""
        out: dict[str, float] = {}
        for suffix, scores in (("1", self.unigram), ("2", self.bigram), ("lcs", self.lcs)):
            out[f"ra_{suffix}"] = scores.ra
            out[f"sa_{suffix}"] = scores.sa
            out[f"ar_{suffix}"] = scores.ar
        out["ar_risk"] = float(risk_code(self.bigram.ar))
        return out

    def summary(self) -> str:
        """A short human-readable table."""
        lines = [f"O={self.source_words} R={self.reference_words} S={self.summary_words}"]
        lines.append(f"{'unit':<8}{'c_R':>8}{'c_S':>8}{'RA':>10}{'SA':>10}{'AR':>10}")
        for s in (self.unigram, self.bigram, self.lcs):
            lines.append(
                f"{s.granularity:<8}{s.c_reference:>8.3f}{s.c_summary:>8.3f}{s.ra:>10.3f}{s.sa:>10.3f}{s.ar:>10.4f}"
            )
        lines.append(f"risk (bigram AR): {self.ar_risk}")
        return "\n".join(lines)


def granularity_scores(
    granularity: Granularity,
    source: Sequence[str],
    reference: Sequence[str],
    summary: Sequence[str],
    *,
    lcs_source: LcsSource | None = None,
) -> GranularityScores:
    """Both overlaps and RA, SA, AR at one granularity; ``lcs_source`` as in :func:`overlap`."""
    c_r = overlap(reference, source, granularity, lcs_source=lcs_source)
    c_s = overlap(summary, source, granularity, lcs_source=lcs_source)
    o, r, s = len(source), len(reference), len(summary)
    return GranularityScores(
        granularity=granularity,
        c_reference=c_r,
        c_summary=c_s,
        ra=harmonic_mean(r, o) * (1.0 - c_r) ** 3,
        sa=harmonic_mean(s, o) * (1.0 - c_s) ** 3,
        ar=(1.0 - c_s) ** 3 / ((1.0 - c_r) ** 3 + EPSILON),
    )


def abstractiveness_from_tokens(
    source: Sequence[str], reference: Sequence[str], summary: Sequence[str]
) -> AbstractivenessResult:
    """RA/SA/AR at all three granularities from already tokenised texts.

    Raises ValueError when the source or a text is empty, or when the reference or
    summary has a single token (the bigram overlap is then undefined).
    """
    if not source:
        raise ValueError("source has no tokens")
    if not reference:
        raise ValueError("reference has no tokens")
    if not summary:
        raise ValueError("summary has no tokens")
    return AbstractivenessResult(
        source_words=len(source),
        reference_words=len(reference),
        summary_words=len(summary),
        unigram=granularity_scores("1", source, reference, summary),
        bigram=granularity_scores("2", source, reference, summary),
        lcs=granularity_scores("lcs", source, reference, summary),
    )


def abstractiveness(
    source: str,
    reference: str,
    summary: str,
    *,
    tokenizer: Callable[[str], list[str]] = tokenize,
) -> AbstractivenessResult:
    """RA/SA/AR for raw texts, tokenised with ``tokenizer`` (default lower-case alphanumeric)."""
    return abstractiveness_from_tokens(tokenizer(source), tokenizer(reference), tokenizer(summary))
