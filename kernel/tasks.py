"""Enqueueing background work: a task is sent only once the transaction that wrote its rows commits."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

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
