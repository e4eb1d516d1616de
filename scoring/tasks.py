"""Background scoring: one task per chunk of candidates."""

from __future__ import annotations

from celery import shared_task

from scoring import services


@shared_task(
    bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=2, soft_time_limit=1800, time_limit=1900
)
def score_chunk(self, run_id: int, candidate_ids: list[int]) -> int:  # type: ignore[no-untyped-def]
    try:
        return services.scoring_run_chunk(run_id=run_id, candidate_ids=candidate_ids)
    except Exception as error:
        if self.request.retries < self.max_retries:
            raise self.retry(countdown=5 * (self.request.retries + 1)) from error
        services.scoring_run_fail(run_id=run_id, reason=f"{type(error).__name__}: {error}")
        raise
