"""Background research jobs, and the sweeper for jobs whose worker died.

A job is not retried on an error (its reason is stored for the researcher); a job whose worker died
is redelivered or swept and restarts from scratch, up to analysis.services.MAX_ATTEMPTS times."""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task

from analysis import services
from annotation.services.generation import sweeper_record_run


def _job_failed(task: Task, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
    job_id = kwargs.get("job_id", args[0] if args else None)
    services.research_job_mark_failed(job_id=job_id, reason=f"Unexpected error ({type(exc).__name__}: {exc})")


@shared_task(
    name=services.RUN_RESEARCH_JOB,  # the name the services send it by
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=3600,
    time_limit=3700,
    on_failure=_job_failed,
)
def run_research_job(self, job_id: int) -> str:  # type: ignore[no-untyped-def]
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    return services.research_job_run(job_id=job_id, redelivered=redelivered).status


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
