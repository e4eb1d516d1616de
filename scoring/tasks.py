"""Background scoring: one task per chunk of candidates, and the sweeper for runs whose workers died.

Retries: a chunk is retried twice (5 s, then 10 s later) and then fails the run with its reason
(`on_failure`); a chunk runs at most 3 times per message, under a 30-minute soft limit each."""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task

from annotation.services.generation import sweeper_record_run
from scoring import services


def _chunk_failed(task: Task, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
    run_id = kwargs.get("run_id", args[0] if args else None)
    services.scoring_run_mark_failed(run_id=run_id, reason=f"{type(exc).__name__}: {exc}")


@shared_task(
    name=services.SCORE_CHUNK,  # the name the services send it by
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=2,
    soft_time_limit=1800,
    time_limit=1900,
    on_failure=_chunk_failed,
)
def score_chunk(self, run_id: int, candidate_ids: list[int], chunk_index: int | None = None) -> int:  # type: ignore[no-untyped-def]
    try:
        return services.scoring_run_chunk(run_id=run_id, candidate_ids=candidate_ids, chunk_index=chunk_index)
    except Exception as error:
        if self.request.retries < self.max_retries:
            raise self.retry(countdown=5 * (self.request.retries + 1)) from error
        raise


@shared_task(soft_time_limit=60, time_limit=90)
def sweep_scoring_runs() -> dict[str, int]:
    result = services.scoring_runs_sweep()
    sweeper_record_run(name="scoring", result=result)
    return result
