"""The exclusion rule: which annotators' comparisons an analysis leaves out (failed attention checks, a speed
flag, a researcher's manual exclusion), applied to a comparison table before any statistic, and the counts
it left out per reason, for the report and the export manifest (docs/analysis.md, "Exclusion rule")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import pandas as pd

from analysis.stats._results import ResultMixin
from analysis.stats.errors import AnalysisError

REASONS: tuple[str, ...] = ("checks", "speed", "manual")
"""Every reason a participation can be excluded for, in the order reports list them."""


@dataclass(frozen=True)
class AnnotatorFlags:
    """What quality control knows of one annotator (a participation, by its code in the table)."""

    checks: bool = False
    """Failed attention checks reached the study's threshold."""
    speed: bool = False
    """Median time per comparison under the study's threshold."""
    manual: bool = False
    """A researcher marked the participation excluded."""

    def reasons(self) -> tuple[str, ...]:
        return tuple(r for r in REASONS if getattr(self, r))


@dataclass(frozen=True)
class ExclusionRule(ResultMixin):
    """The reasons that exclude an annotator; any of them suffices. Empty: nothing is excluded."""

    reasons: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = [r for r in self.reasons if r not in REASONS]
        if unknown:
            raise AnalysisError(
                f"unknown exclusion reason {', '.join(map(repr, unknown))}: choose among {', '.join(REASONS)} "
                "(comma-separated) or none"
            )
        object.__setattr__(self, "reasons", tuple(r for r in REASONS if r in self.reasons))

    @classmethod
    def parse(cls, text: str | Iterable[str]) -> ExclusionRule:
        """``"checks,speed,manual"``, ``"manual"``, ``"none"`` or ``""`` (nothing), or a list of reasons."""
        parts = text.split(",") if isinstance(text, str) else list(text)
        names = [p.strip().lower() for p in parts if p.strip()]
        if names == ["none"]:
            return cls(())
        return cls(tuple(names))

    def __str__(self) -> str:
        return ",".join(self.reasons) or "none"


@dataclass(frozen=True)
class ExclusionSummary(ResultMixin):
    """What the rule left out: per reason, the annotators flagged for it and their comparisons (an annotator
    flagged for two reasons counts under both); in total, each once. Zero counts are kept, never dropped."""

    rule: str
    participations: Mapping[str, int]
    comparisons: Mapping[str, int]
    total_participations: int
    total_comparisons: int
    kept_comparisons: int
    excluded_annotators: tuple[str, ...] = field(default=())

    def sentence(self) -> str:
        per = "; ".join(
            f"{reason}: {self.participations[reason]} participations, {self.comparisons[reason]} comparisons"
            for reason in REASONS
        )
        return (
            f"Exclusion rule: {self.rule}. Left out {self.total_participations} participations and "
            f"{self.total_comparisons} comparisons ({per}); {self.kept_comparisons} comparisons analysed."
        )


def exclusion_summary(
    rows_per_annotator: Mapping[str, int], flags: Mapping[str, AnnotatorFlags], rule: ExclusionRule
) -> ExclusionSummary:
    """What the rule leaves out of a table with these comparisons per annotator.

    ``flags`` maps an annotator (the table's ``annotator`` column) to its flags; an annotator without flags
    is kept. Every reason is counted, zero or not; a reason the rule does not apply counts zero."""
    participations = dict.fromkeys(REASONS, 0)
    comparisons = dict.fromkeys(REASONS, 0)
    excluded: set[str] = set()
    for annotator, flag in flags.items():
        hits = [r for r in flag.reasons() if r in rule.reasons]
        for reason in hits:
            participations[reason] += 1
            comparisons[reason] += int(rows_per_annotator.get(str(annotator), 0))
        if hits:
            excluded.add(str(annotator))
    total = int(sum(rows_per_annotator.values()))
    left_out = int(sum(n for a, n in rows_per_annotator.items() if str(a) in excluded))
    return ExclusionSummary(
        rule=str(rule),
        participations=participations,
        comparisons=comparisons,
        total_participations=len(excluded),
        total_comparisons=left_out,
        kept_comparisons=total - left_out,
        excluded_annotators=tuple(sorted(excluded)),
    )


def apply_exclusion(
    table: pd.DataFrame, flags: Mapping[str, AnnotatorFlags], rule: ExclusionRule
) -> tuple[pd.DataFrame, ExclusionSummary]:
    """The table without the comparisons of annotators the rule excludes, and what was left out."""
    if table.empty or "annotator" not in table.columns:
        return table, exclusion_summary({}, flags, rule)
    annotators = table["annotator"].astype(str)
    summary = exclusion_summary(annotators.value_counts().to_dict(), flags, rule)
    kept = table[~annotators.isin(summary.excluded_annotators).to_numpy()]
    return kept.reset_index(drop=True), summary
