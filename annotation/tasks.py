"""Background work of the annotator journey. Each task takes ids, calls one service, owns its retries,
and owns failure: whatever a task raises ends in a `*_mark_failed` service through `on_failure`.

Retries live here and only here: the model-server and OpenAlex clients make one call per attempt
(their own retries are off by default), so a candidate costs at most MAX_ATTEMPTS calls.

Generation, per candidate with the defaults (docs/backends.md, "Retries and time limits"):
  the model server gets the summary's time-out, LLM_TIMEOUT = 120 s, once across its attempts: each attempt's
  call (a model-server slot waited for included) has what the earlier ones left (`spent_s`, carried by the
  retry), and a call that spends it (a time-out) on a server that answered nothing else meanwhile fails the
  summary at once, not retried: a server that hangs costs one time-out, and the annotator's "try again" gives it
  a whole time-out again. A time-out while the server answered other calls (busy, a latency tail) is retried
  with a whole time-out, up to MAX_ATTEMPTS calls (the worst case below then is 4 x 120 s + backoff).
    calls waiting at most 120 s in all (+ at most one read time-out more, a reply stalled at its deadline)
  + backoff before attempts 2, 3, 4: 2.5-5 + 5-10 + 10-20 s (equal jitter)  = 17.5-35 s
  = 155 s at most (275 s with the stall), at most 4 calls when the server answers with errors fast.
What bounds an attempt: under prefork, the soft time limit (240 s) as well; under the threads pool (the annotator
worker, docker-compose.yml), which enforces no time limit, the call's own time-out: the HTTP client's per read,
and the whole reply's (kernel/reply_deadline.py), so a server trickling its reply is cut at the time-out too; the
database waits at most DATABASE_POOL_TIMEOUT_S for a connection. A soft time limit is one more transient fault,
retried like a timeout with the time it took counted as spent.
Retrieval: 4 attempts x at most 60 s (the soft limit, enforced by the prefork retrieval worker; OpenAlex waits
20 s per call, its whole reply included, two calls when a long question finds nothing: 40 s, which bounds an
attempt on a threads worker too) + 17.5-35 s backoff = 275 s at most, under the sweeper's 10-minute retrieval
deadline.
"""

from __future__ import annotations

import contextlib
import random
import time
from typing import Any

from celery import Task, shared_task
from celery.exceptions import Reject, SoftTimeLimitExceeded
from django import db
from django.conf import settings

from annotation.services.generation import (
    GENERATE_CANDIDATE,
    MAX_ATTEMPTS,
    candidate_generate,
    candidate_mark_failed,
    candidate_mark_unsent,
    candidate_retry_later,
)
from annotation.services.query import (
    RETRIEVE_QUERY,
    background_sweep,
    query_lease_renew,
    query_mark_failed,
    query_retrieve,
)
from generation import openai_chat  # noqa: F401 - imported before the pool forks, not per child
from kernel.backends import BackendError
from kernel.tasks import FIRST, LATER, OrderedTask, unreachable_service

GENERATION_SOFT_TIME_LIMIT_S: int = settings.GENERATION_SOFT_TIME_LIMIT_S
RETRIEVAL_SOFT_TIME_LIMIT_S: int = settings.RETRIEVAL_SOFT_TIME_LIMIT_S
_UNREACHABLE_DATABASE = (db.OperationalError, db.InterfaceError)
# Before attempt n+1: uniform(c/2, c) s with c = 5 * 2**(n-1) ("equal jitter"): 2.5-5, 5-10, 10-20 s. Never at
# once: a database or broker that just went away is not asked again in the same instant by every task it failed.
BACKOFF_BASE_S = 5.0
# A service's Retry-After is waited for up to this long (well under the sweeper's REQUEUE_QUEUED_AFTER).
RETRY_AFTER_CAP_S = 120.0


def unexpected_reason(exc: BaseException) -> str:
    if isinstance(exc, BackendError):
        return exc.reason
    return f"Unexpected error ({type(exc).__name__}: {exc}). An administrator can retry it once the cause is fixed."


def _retrieval_failed(task: Task, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
    query_id = kwargs.get("query_id", args[0] if args else None)
    query_mark_failed(query_id=query_id, reason=unexpected_reason(exc))


def _generation_failed(task: Task, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
    candidate_id = kwargs.get("candidate_id", args[0] if args else None)
    candidate_mark_failed(candidate_id=candidate_id, reason=unexpected_reason(exc))


@shared_task(
    name=RETRIEVE_QUERY,  # the name the services send it by
    bind=True,
    base=OrderedTask,
    order=LATER,  # behind the generations of questions already retrieved (kernel/tasks.py)
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=MAX_ATTEMPTS - 1,
    soft_time_limit=RETRIEVAL_SOFT_TIME_LIMIT_S,
    time_limit=RETRIEVAL_SOFT_TIME_LIMIT_S + 15,
    on_failure=_retrieval_failed,
)
def retrieve_query(self, query_id: int) -> None:  # type: ignore[no-untyped-def]
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    try:
        query_retrieve(query_id=query_id, redelivered=redelivered)
    except Exception as error:
        if not _retriable(error):
            raise
        reason = _transient_reason(error, RETRIEVAL_SOFT_TIME_LIMIT_S)
        if reason is not None and self.request.retries < self.max_retries:
            countdown = backoff(self.request.retries, error)
            # The lease covers the wait, so the sweeper does not take a scheduled retry for a dead worker, nor
            # another message the search; it lapses when the retry is due, for the retry to claim it. A database
            # out of reach (the fault being retried, often) leaves the lease as it is: the retry is sent all the same.
            with contextlib.suppress(*_UNREACHABLE_DATABASE):
                query_lease_renew(query_id=query_id, seconds=countdown)
            raise self.retry(countdown=countdown) from error
        if reason is not None:
            reason = f"Gave up after {self.request.retries + 1} attempts; the last: {reason}"
        query_mark_failed(query_id=query_id, reason=reason or unexpected_reason(error))


@shared_task(
    name=GENERATE_CANDIDATE,  # the name the services send it by
    bind=True,
    base=OrderedTask,
    order=FIRST,
    acks_late=True,
    reject_on_worker_lost=True,
    # The cap is the candidate's own attempt count (candidate_claim); this only bounds the message chain.
    max_retries=MAX_ATTEMPTS,
    soft_time_limit=GENERATION_SOFT_TIME_LIMIT_S,
    time_limit=GENERATION_SOFT_TIME_LIMIT_S + 30,
    on_failure=_generation_failed,
)
def generate_candidate(self, candidate_id: int, spent_s: float = 0.0) -> None:  # type: ignore[no-untyped-def]
    # The broker hands a message out again only when the process holding it died without acknowledging it.
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    started = time.monotonic()
    try:
        candidate_generate(candidate_id=candidate_id, redelivered=redelivered, spent_s=spent_s)
    except Exception as error:
        if not _retriable(error):
            raise
        reason = _transient_reason(error, GENERATION_SOFT_TIME_LIMIT_S)
        if reason is None:  # permanent: a configuration the admin must fix
            candidate_mark_failed(candidate_id=candidate_id, reason=unexpected_reason(error))
            return
        if _queued_again(candidate_id=candidate_id, reason=reason):
            # The retry carries what this attempt waited on the model server: the summary gets its time-out
            # once, across attempts (generation/openai_chat.py), so a server that hangs costs one time-out.
            if isinstance(error, SoftTimeLimitExceeded):  # the call was cut short by the limit
                spent_s += time.monotonic() - started
            else:
                spent_s += float(getattr(error, "waited_s", 0.0) or 0.0)
            try:
                raise self.retry(countdown=backoff(self.request.retries, error), kwargs={"spent_s": spent_s}) from error
            except Reject:
                # The retry could not be sent (the broker is out of reach): the candidate waits, queued, for
                # the next sweep to send it again once the broker is back.
                candidate_mark_unsent(candidate_id=candidate_id)
                raise


def _queued_again(*, candidate_id: int, reason: str) -> bool:
    """`candidate_retry_later`, except that a database out of reach (the fault being retried, often) does not end
    the candidate: its retry is sent all the same, and claims it if it is still queued; one left running under
    its lease is sent again by the sweeper once the lease lapses."""
    try:
        return candidate_retry_later(candidate_id=candidate_id, reason=reason)
    except Exception as error:
        if not unreachable_service(error):
            raise
        return True


@shared_task(soft_time_limit=60, time_limit=90)
def sweep_generation() -> dict[str, int]:
    return background_sweep()


def _retriable(error: BaseException) -> bool:
    """What the tasks look at before giving up: a backend's error, a time limit, or the database, a broker or
    Redis out of reach (restarting: docs/backends.md, "Sweepers"); anything else fails through `on_failure`."""
    return isinstance(error, BackendError | SoftTimeLimitExceeded) or unreachable_service(error)


def _transient_reason(error: BaseException, soft_limit_s: int) -> str | None:
    """The reason to show while retrying, or None when a retry cannot help."""
    if isinstance(error, SoftTimeLimitExceeded):
        return f"no answer within the {soft_limit_s} s time limit"
    if unreachable_service(error):
        return f"the database, the broker or Redis could not be reached ({type(error).__name__}: {error})"
    if isinstance(error, BackendError) and error.transient:
        return error.reason
    return None


def backoff(retries: int, error: BaseException | None = None) -> float:
    """Exponential backoff with equal jitter: 2.5-5, 5-10, 10-20 s before attempts 2, 3, 4; never sooner than
    the service's Retry-After (up to RETRY_AFTER_CAP_S), or every attempt of a rate-limited call would be
    spent inside the window the server asked to be left alone in."""
    cap = BACKOFF_BASE_S * 2**retries
    delay = random.uniform(cap / 2, cap)
    retry_after = getattr(error, "retry_after", None)
    if isinstance(retry_after, int | float) and retry_after > 0:
        delay = max(delay, min(float(retry_after), RETRY_AFTER_CAP_S) + random.uniform(0, 1))
    return delay
