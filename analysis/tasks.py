"""Background research jobs, and the sweeper for jobs whose worker died.

A job is not retried on an error of its own (its reason is stored for the researcher). It starts again, from
scratch, up to analysis.services.MAX_ATTEMPTS times in all: when its worker died (redelivered or swept), and when
the research storage failed its upload with a transient fault (no answer, a time-out, a 5xx, throttling), after
RESEARCH_STORAGE_RETRY_S, then twice that. A permanent fault of the store (no bucket, a refused key) is a reason
at once (kernel/storage.py)."""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task
from django.conf import settings

from analysis import services
from annotation.services.generation import sweeper_record_run


def _job_failed(task: Task, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
    job_id = kwargs.get("job_id", args[0] if args else None)
    services.research_job_mark_failed(job_id=job_id, reason=f"Unexpected error ({type(exc).__name__}: {exc})")


def storage_backoff(attempt: int) -> float:
    """Seconds before the try after `attempt` (1, 2, ...): RESEARCH_STORAGE_RETRY_S, doubled each time."""
    return float(settings.RESEARCH_STORAGE_RETRY_S) * 2 ** (attempt - 1)


@shared_task(
    name=services.RUN_RESEARCH_JOB,  # the name the services send it by
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    # The cap is the job's own count of starts (research_job_claim); this only bounds the message chain.
    max_retries=services.MAX_ATTEMPTS,
    soft_time_limit=3600,
    time_limit=3700,
    on_failure=_job_failed,
)
def run_research_job(self, job_id: int) -> str:  # type: ignore[no-untyped-def]
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    try:
        return services.research_job_run(job_id=job_id, redelivered=redelivered).status
    except services.StorageTryAgain as fault:
        if fault.attempt >= services.MAX_ATTEMPTS:
            services.research_job_give_up(job_id=job_id, attempt=fault.attempt, reason=fault.reason)
            return "failed"
        wait = storage_backoff(fault.attempt)
        if not services.research_job_retry_later(
            job_id=job_id, attempt=fault.attempt, reason=fault.reason, seconds=wait
        ):
            return "cancelled"
        # A retry the broker does not take leaves the job running under that lease: the sweeper sends it again.
        raise self.retry(countdown=wait, exc=fault) from fault


@shared_task(soft_time_limit=60, time_limit=90)
def sweep_research_jobs() -> dict[str, int]:
    result = services.research_jobs_sweep()
    sweeper_record_run(name="research", result=result)
    return result


@shared_task(soft_time_limit=600, time_limit=660)
def sweep_research_storage() -> dict[str, int]:
    result = services.research_storage_sweep()
    sweeper_record_run(name="research-storage", result=result)
    return result
