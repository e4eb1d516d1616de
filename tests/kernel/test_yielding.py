"""Research work yields to annotator work on its host (kernel/yielding.py), on a real Redis: a mark in flight
pauses a research loop until it ends, within the pause's bound; a killed task's mark lapses; another host's
marks, yielding turned off, or an unreachable Redis pause nothing. The real workers' side is
tests/integration/test_yielding.py."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from kernel import yielding
from tests.integration.worker import broker_url


@pytest.fixture
def host(settings: Any) -> Iterator[str]:
    """Yielding on, on the test workers' Redis, under a host name of this test's own."""
    url = broker_url()
    if not url.startswith(("redis://", "rediss://")):
        pytest.fail("the yielding tests need Redis: set TEST_WORKER_BROKER_URL=redis://...")
    name = f"test-host-{uuid.uuid4().hex[:8]}"
    settings.RESEARCH_YIELDS_TO_ANNOTATORS = True
    settings.RESEARCH_YIELD_URL = url
    settings.RESEARCH_YIELD_HOST = name
    key = yielding._key()
    yield name
    redis.Redis.from_url(url).delete(key)


def timed(pause: yielding.ResearchPause) -> float:
    started = time.monotonic()
    pause()
    return time.monotonic() - started


def test_research_pauses_while_annotator_work_is_in_flight_and_goes_on_when_it_ends(host: str) -> None:
    pause = yielding.ResearchPause(max_pause_s=30)
    assert timed(pause) < 0.1 and pause.pauses == 0  # nothing in flight: no pause

    yielding.annotator_work_began("task-1")
    yielding.annotator_work_began("task-2")
    assert yielding.annotator_work_in_flight() == 2
    ending = threading.Timer(0.3, yielding.annotator_work_ended, args=["task-1"])
    ending.start()
    threading.Timer(0.6, yielding.annotator_work_ended, args=["task-2"]).start()
    waited = timed(pause)
    # Paused until the last of the two ended (0.6 s), not past it by more than a few polls.
    assert 0.55 <= waited < 2.0
    assert pause.pauses == 1 and pause.paused_s == pytest.approx(waited, abs=0.05)
    assert yielding.annotator_work_in_flight() == 0
    assert timed(pause) < 0.1


def test_the_total_pause_of_one_research_task_is_bounded(host: str) -> None:
    yielding.annotator_work_began("a-long-generation")
    pause = yielding.ResearchPause(max_pause_s=0.4)
    assert 0.35 <= timed(pause) < 1.5
    # The budget is spent: the work in flight no longer holds research up.
    assert timed(pause) < 0.1 and timed(pause) < 0.1
    assert pause.pauses == 1 and pause.paused_s == pytest.approx(0.4, abs=0.1)
    assert yielding.annotator_work_in_flight() == 1


def test_the_mark_of_a_task_whose_process_was_killed_lapses(host: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yielding, "MARK_TTL_S", 0.3)
    yielding.annotator_work_began("killed-before-postrun")  # never ended
    assert yielding.annotator_work_in_flight() == 1
    time.sleep(0.4)
    assert yielding.annotator_work_in_flight() == 0
    assert timed(yielding.ResearchPause(max_pause_s=30)) < 0.1


def test_annotator_work_on_another_host_does_not_pause_research(host: str, settings: Any) -> None:
    yielding.annotator_work_began("elsewhere")
    settings.RESEARCH_YIELD_HOST = f"{host}-research"  # a research worker on a host of its own
    assert yielding.annotator_work_in_flight() == 0
    assert timed(yielding.ResearchPause(max_pause_s=30)) < 0.1


def test_turned_off_nothing_is_marked_and_nothing_pauses(host: str, settings: Any) -> None:
    settings.RESEARCH_YIELDS_TO_ANNOTATORS = False
    yielding.annotator_work_began("task")
    assert not redis.Redis.from_url(settings.RESEARCH_YIELD_URL).exists(yielding._key())
    settings.RESEARCH_YIELDS_TO_ANNOTATORS = True
    yielding.annotator_work_began("task")
    settings.RESEARCH_YIELDS_TO_ANNOTATORS = False  # a research worker with yielding off ignores the mark
    assert timed(yielding.ResearchPause(max_pause_s=30)) < 0.1


def test_an_unreachable_redis_pauses_nothing_and_fails_nothing(
    host: str, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.RESEARCH_YIELD_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    yielding.annotator_work_began("task")
    yielding.annotator_work_ended("task")
    assert yielding.annotator_work_in_flight() == 0
    pause = yielding.ResearchPause(max_pause_s=30)
    caplog.clear()
    assert timed(pause) < 0.6
    assert caplog.text.count("could not read the annotator work marks") == 1
    # One failed look per research task: the rows after it do not each wait for a timeout.
    for _ in range(5):
        pause()
    assert caplog.text.count("could not read the annotator work marks") == 1
