"""Opening the broker connection as a web worker starts (platform/gunicorn.conf.py's post_worker_init)."""

from __future__ import annotations

import os

import pytest
import redis
from celery import Celery

from kernel.tasks import broker_warm


def test_a_broker_that_is_down_does_not_stop_the_web_worker_from_starting(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://127.0.0.1:1/0")  # Celery reads the environment first
    app = Celery("warm-down", set_as_current=False)
    assert broker_warm(app=app) < 30  # returned, did not raise
    assert "could not open the broker connection" in caplog.text


def test_the_warm_up_leaves_an_open_connection_to_the_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    url = os.environ.get("TEST_WORKER_BROKER_URL", "redis://127.0.0.1:6379/13")
    monkeypatch.setenv("CELERY_BROKER_URL", url)
    server = redis.Redis.from_url(url)
    db = server.connection_pool.connection_kwargs.get("db", 0)

    def clients() -> int:  # connections on the broker's database, this check's own excluded
        return sum(1 for c in server.client_list() if int(c["db"]) == db) - 1

    before = clients()
    app = Celery("warm-up", set_as_current=False)
    broker_warm(app=app)
    assert clients() > before  # the pooled connection the first send will use, already open
    app.close()
