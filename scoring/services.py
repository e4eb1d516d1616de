"""Scoring a study's candidates: start a run, score chunks in the background, store per metric version."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from annotation.models import Candidate, Study
from kernel.exceptions import ApplicationError
from kernel.heartbeat import heartbeat
from kernel.tasks import enqueue_on_commit
from scoring.inputs import REFERENCE_CHOICES, SOURCE_CHOICES, candidate_rows
from scoring.models import CandidateScore, ScoringRun

logger = logging.getLogger(__name__)
CHUNK_SIZE = 50
# A running run whose lease has expired (no chunk has renewed it: its workers died, or its messages
# were lost) has its unfinished chunks sent again, with a window of REQUEUE_WINDOW before the next
# look; after MAX_RESTARTS such restarts without finishing, it fails with its progress in the reason.
REQUEUE_WINDOW = timedelta(minutes=2)
MAX_RESTARTS = 10


def _lease() -> timedelta:
    return timedelta(seconds=settings.BACKGROUND_LEASE_S)


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
        chunks=[ids[start : start + CHUNK_SIZE] for start in range(0, len(ids), CHUNK_SIZE)],
        lease_expires_at=timezone.now() + REQUEUE_WINDOW,
    )
    _send_chunks(run=run, indexes=range(len(run.chunks)))
    return run


def _send_chunks(*, run: ScoringRun, indexes: Any) -> None:
    from scoring.tasks import score_chunk  # a cycle: scoring.tasks imports this module

    for index in indexes:
        enqueue_on_commit(score_chunk, run.pk, run.chunks[index], index)


def _chunk_index(run: ScoringRun, candidate_ids: list[int], chunk_index: int | None) -> int | None:
    if chunk_index is not None and 0 <= chunk_index < len(run.chunks) and run.chunks[chunk_index] == candidate_ids:
        return chunk_index
    return run.chunks.index(candidate_ids) if candidate_ids in run.chunks else None


def scoring_run_lease_renew(*, run_id: int) -> None:
    ScoringRun.objects.filter(pk=run_id, status=ScoringRun.Status.RUNNING).update(
        lease_expires_at=timezone.now() + _lease()
    )


def scoring_run_chunk(*, run_id: int, candidate_ids: list[int], chunk_index: int | None = None) -> int:
    """Score one chunk and store the results; re-running a chunk overwrites the same rows, and a chunk
    delivered twice is counted once (the run records which chunks are done)."""
    from scoring.core.api import score_rows  # the metric suite, as in _specs

    run = ScoringRun.objects.get(pk=run_id)
    index = _chunk_index(run, candidate_ids, chunk_index)
    if run.status != ScoringRun.Status.RUNNING or index in run.chunks_done:
        return 0
    specs = _specs(list(run.metrics))
    candidates = (
        Candidate.objects.filter(pk__in=candidate_ids)
        .select_related("query__persona")
        .prefetch_related("query__documents")
    )
    with heartbeat(
        lambda: scoring_run_lease_renew(run_id=run_id), every=settings.BACKGROUND_HEARTBEAT_S, name=f"run {run_id}"
    ):
        scoring_run_lease_renew(run_id=run_id)
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
        run = ScoringRun.objects.select_for_update().get(pk=run_id)
        if run.status != ScoringRun.Status.RUNNING or index in run.chunks_done:
            return 0
        # A counted chunk is progress: the restarts that fail a run count windows in a row without any.
        fields = ["done", "lease_expires_at", "restarts"]
        run.done += len(candidate_ids)
        run.restarts = 0
        run.lease_expires_at = timezone.now() + REQUEUE_WINDOW
        if index is not None:
            run.chunks_done = sorted([*run.chunks_done, index])
            fields.append("chunks_done")
        finished = len(run.chunks_done) >= len(run.chunks) if run.chunks else run.done >= run.total
        if finished:
            run.status = ScoringRun.Status.DONE
            run.finished_at = timezone.now()
            run.lease_expires_at = None
            fields += ["status", "finished_at"]
        run.save(update_fields=fields)
    return len(results)


def scoring_run_mark_failed(*, run_id: int, reason: str) -> None:
    ScoringRun.objects.filter(pk=run_id).exclude(status=ScoringRun.Status.DONE).update(
        status=ScoringRun.Status.FAILED, error=reason[:4000], finished_at=timezone.now(), lease_expires_at=None
    )


def scoring_runs_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """The sweeper: a running run that no chunk has renewed within its lease has its unfinished chunks
    sent again (a chunk already counted is skipped), or fails after MAX_RESTARTS restarts in a row with no
    chunk counted in between. A run left running with no lease (started before leases existed) counts too."""
    now = now or timezone.now()
    restarted = failed = 0
    with transaction.atomic():
        for run in ScoringRun.objects.select_for_update(skip_locked=True).filter(
            Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True, created_at__lt=now - REQUEUE_WINDOW),
            status=ScoringRun.Status.RUNNING,
        ):
            missing = [i for i in range(len(run.chunks)) if i not in run.chunks_done]
            if run.restarts >= MAX_RESTARTS or not missing:
                scoring_run_mark_failed(
                    run_id=run.pk,
                    reason=f"The workers scoring this run stopped: {run.done} of {run.total} candidates scored "
                    f"after {run.restarts} restarts. Start a new run.",
                )
                failed += 1
                continue
            ScoringRun.objects.filter(pk=run.pk).update(
                restarts=run.restarts + 1, lease_expires_at=now + REQUEUE_WINDOW
            )
            _send_chunks(run=run, indexes=missing)
            restarted += 1
    if restarted or failed:
        logger.warning("sweeper: %d scoring run(s) restarted, %d failed", restarted, failed)
    return {"scoring_runs_restarted": restarted, "scoring_runs_failed": failed}
