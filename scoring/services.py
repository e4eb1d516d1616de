"""Scoring a study's candidates: start a run, score chunks in the background, store per metric version."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotation.models import Candidate, Study
from kernel.exceptions import ApplicationError
from kernel.tasks import enqueue_on_commit
from scoring.inputs import REFERENCE_CHOICES, SOURCE_CHOICES, candidate_rows
from scoring.models import CandidateScore, ScoringRun

logger = logging.getLogger(__name__)
CHUNK_SIZE = 50


def _specs(metrics: list[str]) -> dict[str, Any]:
    # The metric suite (rouge-score, nltk, scipy) loads on first use, not in every web process.
    from scoring.core.api import metric_specs

    try:
        return {spec.name: spec for spec in metric_specs(metrics)}
    except ValueError as error:
        raise ApplicationError(str(error), field="metrics") from error


@transaction.atomic
def scoring_run_start(
    *, study: Study, metrics: list[str], by: Any = None, reference: str = "titles", source: str = "abstracts"
) -> ScoringRun:
    """Queue the scoring of every generated candidate of a study; chunks run in parallel on workers."""
    if not metrics:
        raise ApplicationError("Choose at least one metric.", field="metrics")
    if reference not in REFERENCE_CHOICES:
        raise ApplicationError(f"Reference must be one of {', '.join(REFERENCE_CHOICES)}.", field="reference")
    if source not in SOURCE_CHOICES:
        raise ApplicationError(f"Source must be one of {', '.join(SOURCE_CHOICES)}.", field="source")
    _specs(metrics)
    ids = list(
        Candidate.objects.filter(query__participation__study=study, status=Candidate.Status.DONE)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    run = ScoringRun.objects.create(
        study=study,
        metrics=metrics,
        options={"reference": reference, "source": source},
        total=len(ids),
        created_by=by if by is not None and getattr(by, "is_authenticated", False) else None,
        status=ScoringRun.Status.RUNNING if ids else ScoringRun.Status.DONE,
        finished_at=None if ids else timezone.now(),
    )
    from scoring.tasks import score_chunk  # a cycle: scoring.tasks imports this module

    for start in range(0, len(ids), CHUNK_SIZE):
        chunk = ids[start : start + CHUNK_SIZE]
        enqueue_on_commit(score_chunk, run.pk, chunk)
    return run


def scoring_run_chunk(*, run_id: int, candidate_ids: list[int]) -> int:
    """Score one chunk and store the results; re-running a chunk overwrites the same rows."""
    from scoring.core.api import score_rows  # the metric suite, as in _specs

    run = ScoringRun.objects.get(pk=run_id)
    specs = _specs(list(run.metrics))
    candidates = (
        Candidate.objects.filter(pk__in=candidate_ids)
        .select_related("query__persona")
        .prefetch_related("query__documents")
    )
    rows = candidate_rows(candidates, **run.options)
    results = score_rows(rows, list(run.metrics))
    with transaction.atomic():
        for result in results:
            errors = result.get("errors") or {}
            for metric in run.metrics:
                value = result.get(metric)
                CandidateScore.objects.update_or_create(
                    candidate_id=result["id"],
                    metric=metric,
                    version=specs[metric].version,
                    defaults={
                        "value": float(value) if isinstance(value, int | float) else None,
                        "reason": "" if isinstance(value, int | float) else str(errors.get(metric, "not computed")),
                    },
                )
        ScoringRun.objects.filter(pk=run_id).update(done=F("done") + len(candidate_ids))
        run.refresh_from_db()
        if run.done >= run.total and run.status == ScoringRun.Status.RUNNING:
            ScoringRun.objects.filter(pk=run_id).update(status=ScoringRun.Status.DONE, finished_at=timezone.now())
    return len(results)


def scoring_run_fail(*, run_id: int, reason: str) -> None:
    ScoringRun.objects.filter(pk=run_id).update(
        status=ScoringRun.Status.FAILED, error=reason[:4000], finished_at=timezone.now()
    )
