"""The process's database connections as a whole: closing them, pools included, as a process ends."""

from __future__ import annotations

import logging

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
