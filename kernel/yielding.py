"""Research work yields to annotator work on the same host: annotator tasks mark themselves in flight in
Redis, and research loops pause between units of work while a mark is there, within a bounded total pause.

    pause = research_pause()          # one per research task: its budget is RESEARCH_YIELD_MAX_PAUSE_S
    for row in rows:
        pause()                       # returns at once when no annotator task runs on this host
        score(row)

Two workers on one host share its cores, its memory bandwidth and the database server's time whatever their
CPU priority, so an annotator's wait during a study-wide scoring run grows unless the research worker stops
while annotator work runs (bench/scale.py --part wait; docs/deploy.md, "Several hosts"). A mark is a member of
a sorted set per host (RESEARCH_YIELD_HOST) scored by the time it lapses, so a task whose process was killed
stops counting after MARK_TTL_S. Redis unreachable: nothing is marked and nothing pauses.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)

MARK_TTL_S = 60.0  # a mark lapses after this even if its task never ends (a killed process)
POLL_S = 0.01  # while paused, how often the research loop looks again
_TIMEOUT_S = 0.5  # a Redis call's socket timeout: a slow Redis must not hold up either side

_client: tuple[int, str, Any] | None = None  # (pid, url, client): a forked pool process makes its own


def enabled() -> bool:
    return bool(settings.RESEARCH_YIELDS_TO_ANNOTATORS and settings.RESEARCH_YIELD_URL)


def _redis() -> Any:
    global _client
    url = settings.RESEARCH_YIELD_URL
    if _client is None or _client[0] != os.getpid() or _client[1] != url:
        import redis

        _client = (
            os.getpid(),
            url,
            redis.Redis.from_url(url, socket_timeout=_TIMEOUT_S, socket_connect_timeout=_TIMEOUT_S),
        )
    return _client[2]


def _key() -> str:
    # The broker's key prefix (the test suite's per-process prefix, config/settings/test.py), then the host.
    options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
    return f"{options.get('global_keyprefix', '')}satisfy:annotator-work:{settings.RESEARCH_YIELD_HOST}"


def annotator_work_began(work_id: str) -> None:
    """Mark one annotator task in flight on this host (task_prerun of the annotator tasks)."""
    if not enabled():
        return
    now = time.time()
    try:
        with _redis().pipeline(transaction=False) as pipe:
            pipe.zadd(_key(), {work_id: now + MARK_TTL_S})
            pipe.zremrangebyscore(_key(), "-inf", now)  # marks of killed processes
            pipe.expire(_key(), int(MARK_TTL_S) + 1)
            pipe.execute()
    except Exception as error:  # noqa: BLE001 - the annotator's task goes on; research just does not pause
        logger.warning("could not mark annotator work in flight: %r", error)


def annotator_work_ended(work_id: str) -> None:
    """Remove the mark (task_postrun, whatever the task's outcome)."""
    if not enabled():
        return
    try:
        _redis().zrem(_key(), work_id)
    except Exception as error:  # noqa: BLE001 - the mark lapses after MARK_TTL_S
        logger.warning("could not clear the annotator work mark: %r", error)


def annotator_work_in_flight() -> int:
    """How many annotator tasks run on this host now (0 when yielding is off or Redis is unreachable)."""
    return _in_flight() or 0


def _in_flight() -> int | None:
    if not enabled():
        return 0
    try:
        return int(_redis().zcount(_key(), time.time(), "+inf"))
    except Exception as error:  # noqa: BLE001 - research goes on
        logger.warning("could not read the annotator work marks: %r", error)
        return None


class ResearchPause:
    """Called between units of research work: returns once no annotator task is in flight on this host, or
    at once after `max_pause_s` spent paused in total over this object's life (one research task), so
    research is slowed, never starved. `paused_s` and `pauses` say what it cost."""

    def __init__(self, *, max_pause_s: float, poll_s: float = POLL_S) -> None:
        self.max_pause_s = max_pause_s
        self.poll_s = poll_s
        self.paused_s = 0.0
        self.pauses = 0
        self._on = enabled() and max_pause_s > 0

    def __call__(self) -> None:
        if not self._on or self.paused_s >= self.max_pause_s:
            return
        in_flight = _in_flight()
        if in_flight is None:
            self._on = False  # Redis unreachable: no further look in this task (each could wait a timeout)
        if not in_flight:
            return
        self.pauses += 1
        started = time.monotonic()
        try:
            while time.monotonic() - started < self.max_pause_s - self.paused_s:
                time.sleep(self.poll_s)
                if not annotator_work_in_flight():
                    break
        finally:
            self.paused_s += time.monotonic() - started


def research_pause() -> ResearchPause:
    """The pause for one research task (RESEARCH_YIELD_MAX_PAUSE_S in total)."""
    return ResearchPause(max_pause_s=float(settings.RESEARCH_YIELD_MAX_PAUSE_S))
