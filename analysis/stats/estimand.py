"""What an analysis's headline estimates, by the design that chose the pairs (docs/analysis.md, "Designs and
estimands"): per-stage win rates for brackets, Bradley-Terry strengths for the adaptive design."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from analysis.stats._results import ResultMixin
from analysis.stats.table import ADAPTIVE_DESIGN, BRACKET_DESIGN, MIXED_DESIGN, design_of

WIN_RATES = "win_rates"
BRADLEY_TERRY = "bradley_terry"
OUTSIDE_DESIGN = "pairs"
"""A table without tournament fields (judgments from outside): pairs of systems, no design the analysis knows."""

SENTENCES = {
    BRACKET_DESIGN: (
        "Bracket design: the headline is the per-stage win rates, a variant's first stage out of all its matches "
        "and each later stage out of its advances into it (every question's pairs follow from the draw and the "
        "answers before them in that question only). Bradley-Terry strengths summarise every decided match beside "
        "them."
    ),
    ADAPTIVE_DESIGN: (
        "Adaptive design: each pair was chosen from the study's judgments before it (the one that tells most about "
        "the ranking), so a system's win rate is a share of the opponents the design chose for it, close ones more "
        "often: it is not comparable to a bracket's per-stage rates, nor across systems, and is shown for "
        "description only. The headline is the Bradley-Terry strengths: their likelihood holds whatever rule chose "
        "the pairs from earlier answers, so a system's log-strength (with annotator-clustered intervals) and the "
        "probability that one system beats another are the estimates to report."
    ),
    MIXED_DESIGN: (
        "The table mixes bracket and adaptive comparisons: per-stage win rates describe each design's own rows and "
        "are not comparable between them; the headline is the Bradley-Terry strengths over every decided match."
    ),
    OUTSIDE_DESIGN: (
        "No tournament design (judgments from outside, analysed as one stage): the headline is each system's win "
        "rate over all its comparisons, with Bradley-Terry strengths beside them."
    ),
}


@dataclass(frozen=True)
class Estimand(ResultMixin):
    """The design the table's stages say produced it, the statistic that is the report's headline, and the
    sentence the report says it in."""

    design: str
    headline: str
    sentence: str


def estimand_of(stages: Iterable[object], *, has_stage: bool) -> Estimand:
    """The estimand of a table whose ``stage`` values are ``stages`` (``has_stage``: the column was in the table,
    not filled in as one ``final`` stage for judgments from outside)."""
    design = (design_of(stages) if has_stage else None) or OUTSIDE_DESIGN
    headline = BRADLEY_TERRY if design in (ADAPTIVE_DESIGN, MIXED_DESIGN) else WIN_RATES
    return Estimand(design=design, headline=headline, sentence=SENTENCES[design])
