"""Research work yields to annotator work on its host (kernel/yielding.py), on a real Redis: a mark in flight
pauses a research loop until it ends, within the pause's bound; a killed task's mark lapses; another host's
marks, yielding turned off, or an unreachable Redis pause nothing. The real workers' side is
tests/integration/test_yielding.py."""

from __future__ import annotations

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


def paused(pause: yielding.ResearchPause) -> int:
    """Run one look of a research loop; how many times it paused (counted, not timed)."""
    before = pause.pauses
    pause()
    return pause.pauses - before


def polls(monkeypatch: pytest.MonkeyPatch, script: dict[int, str]) -> list[int]:
    """Record what each of a pause's looks at Redis saw; after the n-th look, end the task script[n].

    A spy that calls the real read: the test drives the annotator work by the pause's own looks, so no
    assertion rests on how long anything took."""
    seen: list[int] = []
    real = yielding.annotator_work_in_flight

    def look() -> int:
        count = real()
        seen.append(count)
        if len(seen) in script:
            yielding.annotator_work_ended(script[len(seen)])
        return count

    monkeypatch.setattr(yielding, "annotator_work_in_flight", look)
    return seen


def test_research_pauses_while_annotator_work_is_in_flight_and_goes_on_when_it_ends(
    host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pause = yielding.ResearchPause(max_pause_s=30)
    assert paused(pause) == 0  # nothing in flight: no pause

    yielding.annotator_work_began("task-1")
    yielding.annotator_work_began("task-2")
    assert yielding.annotator_work_in_flight() == 2
    seen = polls(monkeypatch, {3: "task-1", 6: "task-2"})
    assert paused(pause) == 1
    # Paused through the first task's end, until the look that found the last one ended, and not a look more.
    assert seen == [2, 2, 2, 1, 1, 1, 0]
    assert pause.paused_s > 0
    assert paused(pause) == 0  # nothing in flight any more: the next look does not pause
    assert len(seen) == 7


def test_the_total_pause_of_one_research_task_is_bounded(host: str, monkeypatch: pytest.MonkeyPatch) -> None:
    yielding.annotator_work_began("a-long-generation")
    pause = yielding.ResearchPause(max_pause_s=0.4)
    seen = polls(monkeypatch, {})
    assert paused(pause) == 1
    # It gave up with the work still in flight, once its budget was spent.
    assert seen and set(seen) == {1}
    assert pause.paused_s >= 0.4
    # The budget is spent: the work in flight no longer holds research up, and is not even looked at.
    looks = len(seen)
    assert paused(pause) == 0 and paused(pause) == 0
    assert len(seen) == looks
    assert yielding.annotator_work_in_flight() == 1


def test_the_mark_of_a_task_whose_process_was_killed_lapses(host: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yielding, "MARK_TTL_S", 0.3)
    yielding.annotator_work_began("killed-before-postrun")  # never ended
    assert yielding.annotator_work_in_flight() == 1
    time.sleep(0.4)
    assert yielding.annotator_work_in_flight() == 0
    assert paused(yielding.ResearchPause(max_pause_s=30)) == 0


def test_annotator_work_on_another_host_does_not_pause_research(host: str, settings: Any) -> None:
    yielding.annotator_work_began("elsewhere")
    settings.RESEARCH_YIELD_HOST = f"{host}-research"  # a research worker on a host of its own
    assert yielding.annotator_work_in_flight() == 0
    assert paused(yielding.ResearchPause(max_pause_s=30)) == 0


def test_turned_off_nothing_is_marked_and_nothing_pauses(host: str, settings: Any) -> None:
    settings.RESEARCH_YIELDS_TO_ANNOTATORS = False
    yielding.annotator_work_began("task")
    assert not redis.Redis.from_url(settings.RESEARCH_YIELD_URL).exists(yielding._key())
    settings.RESEARCH_YIELDS_TO_ANNOTATORS = True
    yielding.annotator_work_began("task")
    settings.RESEARCH_YIELDS_TO_ANNOTATORS = False  # a research worker with yielding off ignores the mark
    assert paused(yielding.ResearchPause(max_pause_s=30)) == 0


def test_an_unreachable_redis_pauses_nothing_and_fails_nothing(
    host: str, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.RESEARCH_YIELD_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    yielding.annotator_work_began("task")
    yielding.annotator_work_ended("task")
    assert yielding.annotator_work_in_flight() == 0
    pause = yielding.ResearchPause(max_pause_s=30)
    caplog.clear()
    assert paused(pause) == 0
    assert caplog.text.count("could not read the annotator work marks") == 1
    # One failed look per research task: the rows after it do not each wait for a timeout.
    for _ in range(5):
        pause()
    assert caplog.text.count("could not read the annotator work marks") == 1
