"""A heartbeat for long background work: a thread that renews the work's lease while it runs.

    with heartbeat(lambda: lease_renew(pk), every=5.0):
        call_the_model()

The lease is what a sweeper reads: work whose lease has expired belongs to a worker that died.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kernel.db import connection_release

logger = logging.getLogger(__name__)


@contextmanager
def heartbeat(beat: Callable[[], object], *, every: float, name: str = "heartbeat") -> Iterator[None]:
    """Call `beat()` every `every` seconds in a daemon thread until the block ends. A failing beat is
    logged and tried again at the next tick: a missed renewal only lets the lease expire early."""
    stop = threading.Event()

    def run() -> None:
        try:
            while not stop.wait(every):
                try:
                    beat()
                except Exception:
                    logger.exception("%s failed", name)
                _release_db_connection()
        finally:
            _close_db_connections()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=every + 5)


def _release_db_connection() -> None:
    """Between beats the thread's connection goes back to its process's pool (kernel.db.connection_release): a
    heartbeat per task in flight would otherwise hold one for the task's whole length."""
    try:
        connection_release()
    except Exception:  # noqa: BLE001 - a connection not given back is closed when the heartbeat ends
        logger.debug("could not give the heartbeat's connection back", exc_info=True)


def _close_db_connections() -> None:
    """The thread's own database connection (Django opens one per thread) is not left open."""
    try:
        from django.db import connections  # the heartbeat runs without Django too (the pure cores' tests)
    except ImportError:  # pragma: no cover - used without Django
        return
    connections.close_all()
