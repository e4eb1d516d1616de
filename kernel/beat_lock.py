"""One beat per deployment: a beat process holds a lock for as long as it runs, and a second one waits for it.

Two beats send every sweep twice, and nothing said so. Now a beat takes the lock before its first tick: a
PostgreSQL session advisory lock on a connection of its own (any host that reaches the database), or on SQLite
an exclusive file lock beside the database file (one host). A beat that finds the lock taken says so in its
log and waits, a hot standby: when the holder stops or dies, its session ends, the lock is free and the standby
takes over within ``BEAT_LOCK_POLL_S``. A beat that loses its lock's connection (the database restarted) stops,
so that its supervisor restarts it and it queues for the lock again instead of running beside a new holder.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

LOCK_KEY = 0x5A7_15F1_BEA7
"""The advisory lock's key: one per database, so one per deployment."""

_held: dict[str, Any] = {}


def _postgres_try(settings_dict: dict[str, Any]) -> Any | None:
    import psycopg  # the PostgreSQL driver: only the beat of a deployment on PostgreSQL

    conn = psycopg.connect(
        host=settings_dict.get("HOST") or None,
        port=settings_dict.get("PORT") or None,
        user=settings_dict.get("USER") or None,
        password=settings_dict.get("PASSWORD") or None,
        dbname=settings_dict["NAME"],
        autocommit=True,
        application_name="satisfy-beat",
        keepalives=1,
        keepalives_idle=10,
        keepalives_interval=5,
        keepalives_count=3,
    )
    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_KEY,)).fetchone()
    if row and row[0]:
        return conn
    conn.close()
    return None


def _sqlite_try(database: str) -> Any | None:
    import fcntl  # POSIX only: the lock of the embedded SQLite deployment

    path = Path(f"{database}.beat.lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def _watch(conn: Any, poll_s: float, lost: Callable[[], None]) -> None:
    while True:
        time.sleep(poll_s)
        try:
            conn.execute("SELECT 1")
        except Exception:  # noqa: BLE001 - any failure means the session, and so the lock, may be gone
            lost()
            return


def beat_lock_acquire(
    *, settings_dict: dict[str, Any], vendor: str, poll_s: float, lost: Callable[[], None] | None = None
) -> None:
    """Block until this process holds the deployment's beat lock (module docstring); log while waiting."""
    if vendor == "postgresql":

        def attempt() -> Any | None:
            return _postgres_try(settings_dict)

    elif vendor == "sqlite":

        def attempt() -> Any | None:
            return _sqlite_try(str(settings_dict["NAME"]))

    else:  # pragma: no cover - the platform runs on PostgreSQL or SQLite
        logger.warning("beat lock: no lock for a %s database; run exactly one beat", vendor)
        return
    waited = False
    while True:
        try:
            held = attempt()
        except Exception as error:  # noqa: BLE001 - the database is down: wait for it as for the lock
            logger.warning("beat lock: the database cannot be reached (%s); trying again in %g s", error, poll_s)
            held = None
        if held is not None:
            break
        if not waited:
            logger.warning(
                "beat lock: another beat holds it (one beat per deployment); this one waits as a standby and "
                "takes over when that one stops"
            )
            waited = True
        time.sleep(poll_s)
    _held["lock"] = held
    logger.warning("beat lock: held by this beat (pid %s)%s", os.getpid(), "; took over" if waited else "")
    if vendor == "postgresql":
        threading.Thread(target=_watch, args=(held, poll_s, lost or _stop), name="beat-lock-watch", daemon=True).start()


def _stop() -> None:
    logger.error("beat lock: lost its database session; stopping so that a restart queues for the lock again")
    os._exit(3)
