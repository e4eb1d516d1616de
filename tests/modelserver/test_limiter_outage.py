"""The model-server limit's Redis restarting (it is the broker's Redis by default): a call waiting for a
slot waits for Redis too, and a call that finishes while Redis is away is not turned into an error.
A redis-server of the test's own, stopped and started for real."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from modelserver.limits import LimitTimeout, RedisLeaseLimiter
from tests.support.redis_server import redis_server

SERVER = "http://model.test/v1"


def test_a_slot_asked_for_while_redis_is_down_is_granted_once_it_is_back(tmp_path: Path) -> None:
    with redis_server(tmp_path) as server:
        limiter = RedisLeaseLimiter(server.url, lease_s=10.0)
        server.stop()
        outcome: dict[str, object] = {}
        asking = threading.Event()

        def ask() -> None:
            asking.set()
            try:
                with limiter.acquire([SERVER], 1, timeout=60.0) as index:
                    outcome["index"], outcome["held"] = index, limiter.in_flight(SERVER)
            except Exception as error:  # noqa: BLE001 - the test reports it
                outcome["error"] = error

        thread = threading.Thread(target=ask)
        thread.start()
        asking.wait(5)
        server.start()
        thread.join(timeout=60)
        assert outcome == {"index": 0, "held": 1}
        assert limiter.in_flight(SERVER) == 0  # given back


def test_redis_still_down_at_the_deadline_is_a_limit_timeout_that_names_the_limiter(tmp_path: Path) -> None:
    with redis_server(tmp_path) as server:
        limiter = RedisLeaseLimiter(server.url)
        server.stop()
        with pytest.raises(LimitTimeout, match=r"the model-server limiter \(Redis\) could not be reached within 1s"):
            with limiter.acquire([SERVER], 1, timeout=1.0):
                pass


def test_a_call_that_ends_while_redis_is_away_ends_normally(tmp_path: Path) -> None:
    with redis_server(tmp_path) as server:
        limiter = RedisLeaseLimiter(server.url)
        with limiter.acquire([SERVER], 1, timeout=5.0) as index:
            server.stop()  # gone while the model answers: the release must not raise
            answered = index
        server.start()
        assert answered == 0
        with limiter.acquire([SERVER], 1, timeout=5.0) as index:  # the new Redis hands out slots again
            assert limiter.in_flight(SERVER) == 1
