"""Work sent by task name (kernel.tasks.enqueue_on_commit, as the services send it): the message is the one the
task would send itself, on its queue (CELERY_TASK_ROUTES) at its place in it (OrderedTask: a question's
summaries before the next retrieval), and only once the transaction commits. On a real Redis broker."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.conf import settings

from kernel.tasks import enqueue_on_commit
from tests.conftest import require
from tests.integration.worker import broker_url, celery_app_sending_to, flush_broker, redis_key_prefix


@pytest.fixture
def broker() -> Iterator[redis.Redis]:
    """This process's Celery app sending to the test Redis (emptied before and after), and a client on it."""
    url = broker_url()
    require(url.startswith("redis"), "reads the queues as Redis lists: TEST_WORKER_BROKER_URL=redis://...")
    flush_broker(url)
    client = redis.Redis.from_url(url)
    try:
        with celery_app_sending_to(url):
            yield client
    finally:
        client.close()
        flush_broker(url)


def waiting(client: redis.Redis, queue: str) -> list[tuple[str, list[Any], int]]:
    """(task name, args, priority step) of each message waiting in `queue`: kombu keeps one list per step,
    the queue's own name for step 0 and "<queue>\\x06\\x16<step>" for 3, 6 and 9, served lowest step first."""
    found = []
    for step in (0, 3, 6, 9):
        key = f"{redis_key_prefix()}{queue}" + (f"\x06\x16{step}" if step else "")
        for raw in client.lrange(key, 0, -1):
            message = json.loads(raw)
            args = json.loads(base64.b64decode(message["body"]))[0]
            found.append((message["headers"]["task"], args, step))
    return sorted(found)


def test_work_sent_by_name_waits_for_the_commit_then_takes_its_queue_and_place(
    db: None, broker: redis.Redis, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        enqueue_on_commit("annotation.tasks.retrieve_query", 11)
        enqueue_on_commit("annotation.tasks.generate_candidate", 12)
        enqueue_on_commit("scoring.tasks.score_chunk", 13, [21, 22], 0)
        enqueue_on_commit("analysis.tasks.run_research_job", 14)
        assert waiting(broker, settings.ANNOTATOR_QUEUE) == waiting(broker, settings.RESEARCH_QUEUE) == []
        assert waiting(broker, settings.RETRIEVAL_QUEUE) == []

    # The retrieval on its own queue (never behind summaries), one step behind them should one queue carry both.
    assert waiting(broker, settings.ANNOTATOR_QUEUE) == [("annotation.tasks.generate_candidate", [12], 0)]
    assert waiting(broker, settings.RETRIEVAL_QUEUE) == [("annotation.tasks.retrieve_query", [11], 3)]
    assert waiting(broker, settings.RESEARCH_QUEUE) == [
        ("analysis.tasks.run_research_job", [14], 0),
        ("scoring.tasks.score_chunk", [13, [21, 22], 0], 0),
    ]


def test_a_name_no_task_is_registered_under_is_refused_when_the_work_is_enqueued(
    db: None, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        with pytest.raises(LookupError, match="'annotation.tasks.generate_candidates'"):
            enqueue_on_commit("annotation.tasks.generate_candidates", 12)
    assert callbacks == []  # nothing left to send at the commit
