"""The process's database connections as a whole: closing them, pools included, as a process ends; giving one back
while a thread waits on something else; running work again while the database is briefly away."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
logger = logging.getLogger(__name__)


def close_database_pools() -> None:
    """Close this thread's connections and every connection pool of this process (Django's psycopg pool, one per
    database alias; docs/deploy.md, "Database connections"). For a process that is about to exit: the pool's
    threads would otherwise hold its exit for the pool's own close time-out (5 s). Never raises."""
    from django.db import connections  # kernel/db.py is imported by gunicorn's config, before Django is set up

    for connection in connections.all(initialized_only=True):
        try:
            connection.close()
            close_pool = getattr(connection, "close_pool", None)  # PostgreSQL only
            if close_pool is not None:
                close_pool()
        except Exception:  # noqa: BLE001 - an exiting process reports and goes on
            logger.warning("could not close the %s database pool", connection.alias, exc_info=True)


def connection_release() -> None:
    """Give this thread's database connection back to its process's pool while the thread waits on something
    else (a model server's answer, a heartbeat's next tick), so that a process running many such waits in threads
    (a threads-pool worker) holds a connection only while it talks to the database: its pool of
    DATABASE_POOL_MAX_SIZE then serves any number of threads (docs/deploy.md, "Database connections"). The next
    query takes one from the pool again. Nothing is done inside a transaction, or without a pool (a connection
    per thread, kept CONN_MAX_AGE: closing it would cost a new connection per wait)."""
    from django.conf import settings  # kernel/db.py is imported by gunicorn's config, before Django is set up
    from django.db import connection

    if not settings.configured:  # a heartbeat in a plain-Python process (the pure cores' tests)
        return
    pooled = bool((connection.settings_dict.get("OPTIONS") or {}).get("pool"))
    if pooled and connection.connection is not None and not connection.in_atomic_block:
        connection.close()


def database_retried(work: Callable[[], T], *, within_s: float, what: str) -> T:
    """`work()`, run again while the database cannot be reached (restarting, failing over, no pooled connection
    free within DATABASE_POOL_TIMEOUT_S), after 0.5, 1, 2, 4, 8, 8, ... s, for up to `within_s` seconds; then the
    last error is raised. For background work that holds something dear to store (a scoring chunk's judged
    scores: minutes of a model server's time) and whose `work` is a transaction of its own that may run twice
    (an upsert, a count under a row lock). Before each new attempt this thread's connection is closed, so that
    a connection the restart broke is not used again (pooled or kept CONN_MAX_AGE alike). Inside a transaction
    nothing is retried: the caller's transaction is lost with the connection."""
    from django import db  # kernel/db.py is imported by gunicorn's config, before Django is set up
    from django.db import connection

    deadline = time.monotonic() + within_s
    delay = 0.5
    while True:
        try:
            return work()
        except (db.OperationalError, db.InterfaceError) as error:
            if connection.in_atomic_block or time.monotonic() + delay > deadline:
                raise
            logger.warning("%s: the database could not be reached (%s); trying again in %.1f s", what, error, delay)
        with contextlib.suppress(Exception):  # a broken connection may fail to close too: it is dropped all the same
            connection.close()
        time.sleep(delay)
        delay = min(delay * 2, 8.0)
