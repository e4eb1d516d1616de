"""Enqueueing background work: a task is sent only once the transaction that wrote its rows commits."""

from __future__ import annotations

from typing import Any, Protocol

from django.db import transaction


class Task(Protocol):
    """What the helper needs of a Celery task: `delay` sends it to the broker."""

    def delay(self, *args: Any) -> Any: ...


def enqueue_on_commit(task: Task, *args: Any) -> None:
    """Send `task.delay(*args)` after the current transaction commits, so a worker never sees a row that
    is not committed yet (outside a transaction it is sent at once; after a rollback, never)."""
    transaction.on_commit(lambda: task.delay(*args))
