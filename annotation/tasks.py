"""Background work of the annotator journey. Each task takes ids, calls one service, owns its retries."""

from __future__ import annotations

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded

from annotation.backends import openai_chat  # noqa: F401 - imported before the pool forks, not per child
from annotation.services.generation import candidate_generate, candidate_mark_failed, candidates_requeue_stuck
from annotation.services.query import query_mark_failed, query_retrieve
from kernel.backends import BackendError

MAX_RETRIES = 4


@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=MAX_RETRIES,
    soft_time_limit=120,
    time_limit=150,
)
def retrieve_query(self, query_id: int) -> None:  # type: ignore[no-untyped-def]
    try:
        query_retrieve(query_id=query_id)
    except BackendError as error:
        if error.transient and self.request.retries < MAX_RETRIES:
            raise self.retry(countdown=_backoff(self.request.retries)) from error
        query_mark_failed(query_id=query_id, reason=error.reason)
    except SoftTimeLimitExceeded:
        query_mark_failed(query_id=query_id, reason="Retrieval took too long.")


@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=MAX_RETRIES,
    soft_time_limit=240,
    time_limit=300,
)
def generate_candidate(self, candidate_id: int) -> None:  # type: ignore[no-untyped-def]
    final_attempt = self.request.retries >= MAX_RETRIES
    # The broker hands a message out again only when the process holding it died without acknowledging it.
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    try:
        candidate_generate(candidate_id=candidate_id, final_attempt=final_attempt, redelivered=redelivered)
    except BackendError as error:
        raise self.retry(countdown=_backoff(self.request.retries)) from error
    except SoftTimeLimitExceeded:
        candidate_mark_failed(candidate_id=candidate_id, reason="Generation took longer than the time limit.")


@shared_task
def requeue_stuck_candidates() -> int:
    return candidates_requeue_stuck()


def _backoff(retries: int) -> float:
    """Exponential backoff with full jitter: 2, 4, 8, 16 s caps."""
    import random

    return random.uniform(0, 2 ** (retries + 1))
