"""Family, direction and comparability of a comparison table's metric columns, from the metric registry.

The one lookup that every path uses (``analyze`` for files and notebooks, the research jobs for the
database): a column is a registry metric (``rouge1``) or a judge's metric
(``judge:<model>@<server>:<prompt version>:<metric>``, see ``scoring.core.judges.judge_column``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from analysis.stats._results import ResultMixin
from scoring.core.judges import PAIRWISE_METRICS, parse_judge_column

UNASSIGNED_FAMILY = "unassigned"


@dataclass(frozen=True)
class MetricInfo(ResultMixin):
    """What the agreement statistics need to know about one metric column."""

    column: str
    metric: str
    family: str
    higher_is_better: bool
    known: bool
    varies_by_side: bool
    """False for metrics of the match's shared inputs only (RA: reference and source), which cannot vote."""
    judge: str | None
    prompt_version: str | None
    is_vote: bool
    """A pairwise judge's vote stored as a 1/0 (0.5/0.5 for neither) score pair: its threshold is 0."""


def _registry() -> dict[str, tuple[str, bool, bool]]:
    # Deferred: a table of unknown metrics never needs the metric suite the registry imports.
    try:
        from scoring.core.registry import specs_by_name  # the metric suite: rouge-score, nltk, sacrebleu
    except ImportError:  # pragma: no cover - the suite is a dependency; a notebook may lack an extra
        return {}
    return {
        name: (spec.family, spec.higher_is_better, spec.varies_by_side) for name, (spec, _) in specs_by_name().items()
    }


def describe_metrics(columns: Iterable[str]) -> dict[str, MetricInfo]:
    """Registry facts of each metric column; names the registry does not know are ``known=False``."""
    names = list(columns)
    table = _registry() if names else {}
    out: dict[str, MetricInfo] = {}
    for column in names:
        parsed = parse_judge_column(column)
        metric = parsed.metric if parsed else column
        judge = parsed.judge if parsed else None
        if metric in PAIRWISE_METRICS:
            family, higher, varies, known, vote = "llm_judge", True, True, True, True
        elif metric in table:
            family, higher, varies = table[metric]
            known, vote = True, False
        else:
            family, higher, varies, known, vote = UNASSIGNED_FAMILY, True, True, False, False
        if judge is not None:
            family = f"{family}:{judge}"
        out[column] = MetricInfo(
            column=column,
            metric=metric,
            family=family,
            higher_is_better=higher,
            known=known,
            varies_by_side=varies,
            judge=judge,
            prompt_version=parsed.prompt_version if parsed else None,
            is_vote=vote,
        )
    return out
