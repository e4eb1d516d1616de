"""Background research jobs."""

from __future__ import annotations

from celery import shared_task

from analysis import services


@shared_task(acks_late=True, reject_on_worker_lost=True, soft_time_limit=3600, time_limit=3700)
def run_research_job(job_id: int) -> str:
    return services.research_job_run(job_id=job_id).status
