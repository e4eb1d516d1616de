"""Enqueueing background work: a task is sent only once the transaction that wrote its rows commits."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from celery import Task as CeleryTask
from django.db import transaction

logger = logging.getLogger(__name__)


class Task(Protocol):
    """What the helper needs of a Celery task: `delay` sends it to the broker, `name` names it in logs."""

    name: str

    def delay(self, *args: Any) -> Any: ...


def enqueue_on_commit(
    task: Task,
    *args: Any,
    on_sent: Callable[[], None] | None = None,
    on_send_failed: Callable[[], None] | None = None,
) -> None:
    """Send `task.delay(*args)` after the current transaction commits, so a worker never sees a row that
    is not committed yet (outside a transaction it is sent at once; after a rollback, never).

    The rows are committed by then, so a broker that cannot be reached must not turn the request into a
    500: the failure is logged at error and `on_send_failed` may record it; the periodic sweepers send
    work whose message never arrived (docs/backends.md, "Sweepers")."""

    def send() -> None:
        try:
            task.delay(*args)
        except Exception:  # kombu's OperationalError, redis/amqp connection errors: whatever an outage raises
            logger.exception("could not send %s%r to the broker; a sweeper will send it again", task.name, args)
            if on_send_failed is not None:
                on_send_failed()
            return
        if on_sent is not None:
            on_sent()

    transaction.on_commit(send)


def broker_warm(*, app: Any) -> float:
    """Open a Celery app's broker connection now rather than at the first send: import the broker's
    transport (the `redis` package alone takes most of a second to import on a small host), bind the tasks
    and resolve the result backend, connect one producer and declare the task queues on it, and leave it in the app's producer
    pool, where the first `delay` finds it. For a web worker just after it starts (platform/gunicorn.conf.py):
    without it the first question a fresh worker takes waits 0.4-1.2 s for all of this.

    Returns the seconds it took. Never raises: a broker that is down now costs the first send its usual
    error handling (`enqueue_on_commit`), not the web worker's start."""
    started = time.perf_counter()
    try:
        app.finalize(auto=True)  # binds the tasks imported so far (at the first send otherwise)
        app.backend  # noqa: B018 - resolving it scans the installed packages' entry points, even for none
        with app.producer_or_acquire() as producer:
            producer.connection.ensure_connection(max_retries=1)
            for queue in app.amqp.queues.values():
                producer.maybe_declare(queue)
    except Exception:  # whatever an unreachable broker raises: the first send reports it again
        logger.warning("could not open the broker connection ahead of the first send", exc_info=True)
    return time.perf_counter() - started


# --- the order of annotator work --------------------------------------------------------------------
# One queue carries both retrievals and generations (ANNOTATOR_QUEUE). In the order sent, a burst of
# questions (a class starting together, a sweep re-sending a backlog) would be retrieved all before any
# summary is written: every annotator waits for every retrieval, and the model server idles meanwhile
# (bench/generation.py: 1.8 s of 9 s with almost no model call at 100 questions). Sent "first", a question's
# generations go ahead of retrievals still waiting, so the workers finish the questions they started and
# retrieve the next one whenever no generation is waiting.
#
# Brokers count priorities the opposite way: Redis (kombu's emulation, one list per priority step, served
# lowest number first, steps 0, 3, 6, 9) and RabbitMQ (highest first, only on a queue declared with
# x-max-priority: config/settings/base.py declares the annotator queue with 1). The number is chosen at
# send time from the broker the app sends to; other transports (the demo's filesystem broker) keep the
# order sent.
FIRST, LATER = "first", "later"
_PRIORITIES = {
    "redis": {FIRST: 0, LATER: 3},
    "amqp": {FIRST: 1, LATER: 0},
}


def broker_priority(app: Any, order: str) -> int | None:
    """The message priority that puts work `order` (FIRST or LATER) where it belongs on `app`'s broker."""
    scheme = str(app.conf.broker_url or "").split("://", 1)[0]
    family = {"redis": "redis", "rediss": "redis", "amqp": "amqp", "amqps": "amqp", "pyamqp": "amqp"}.get(scheme)
    return _PRIORITIES[family][order] if family else None


class OrderedTask(CeleryTask):
    """A Celery task sent with the priority of its `order` on the broker it goes to (see above)."""

    order: str = LATER

    def apply_async(self, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        priority = broker_priority(self.app, self.order)
        if priority is not None:
            options.setdefault("priority", priority)
        return super().apply_async(args, kwargs, **options)
