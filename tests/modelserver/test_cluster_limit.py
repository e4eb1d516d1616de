"""The model-server limit holds across processes: a lease semaphore in Redis, measured at the stand-in.

Real Redis (TEST_WORKER_BROKER_URL or CELERY_BROKER_URL), real worker processes, the stand-in counting
the requests it answers at once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from modelserver import ChatClient, ChatConfig
from modelserver.limits import LimitTimeout, RedisLeaseLimiter
from tests.support.openai_standin import default_responder, openai_standin

ROOT = Path(__file__).resolve().parents[2]


def _redis_url() -> str:
    url = os.environ.get("TEST_WORKER_BROKER_URL") or os.environ.get("CELERY_BROKER_URL") or ""
    if not url.startswith(("redis://", "rediss://")):
        pytest.fail("the cluster-limit tests need Redis: set TEST_WORKER_BROKER_URL=redis://...")
    return url


@pytest.fixture
def prefix() -> Iterator[str]:
    """A key prefix of this test's own, removed afterwards."""
    name = f"test:limit:{uuid.uuid4().hex}"
    yield name
    conn = redis.Redis.from_url(_redis_url())
    for key in conn.scan_iter(f"{name}:*"):
        conn.delete(key)


def _workers(urls: str, prefix: str, *, limit: int, processes: int, threads: int, calls: int, lease_s: float = 10.0):
    args = [str(a) for a in (urls, _redis_url(), prefix, limit, threads, calls, lease_s)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return [
        subprocess.Popen(
            [sys.executable, "-m", "tests.modelserver._limit_worker", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]


def _finish(procs: list[subprocess.Popen[str]]) -> list[str]:
    lines: list[str] = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)  # a bound on a hung test, not an assertion
        assert proc.returncode == 0, err
        lines += out.split()
    return lines


def test_a_limit_of_4_holds_across_3_processes_of_4_threads(prefix: str) -> None:
    # The stand-in holds the first answers until four requests wait together: the limit is reached, proved by
    # counting rather than by racing a delay (a limit that let fewer through would leave the group unformed: a
    # 503, failing the "ok" lines); and while twelve threads want the server, none is ever a fifth in flight.
    with openai_standin(gather=4, hang_s=60) as server:
        procs = _workers(server.base_url, prefix, limit=4, processes=3, threads=4, calls=4)
        lines = _finish(procs)
        assert lines == ["ok"] * 48
        assert server.completions == 48
        assert server.peak_in_flight == 4


def test_without_a_shared_limit_the_same_load_exceeds_4(prefix: str) -> None:
    """The control: the three processes' own limits of 4 let more than 4 through together."""
    # Answers wait until five requests are in flight at once; under a shared limit of 4 that group could never
    # form and the first requests would be refused after hang_s.
    with openai_standin(gather=5, hang_s=60) as server:
        procs = [
            _workers(server.base_url, f"{prefix}:{n}", limit=4, processes=1, threads=4, calls=4)[0] for n in range(3)
        ]
        assert _finish(procs) == ["ok"] * 48
        assert server.peak_in_flight >= 5


def _lease_expiry_ms(prefix: str, base_url: str) -> int:
    """The holder's one lease's expiry on Redis's clock (its score in the server's sorted set)."""
    conn = redis.Redis.from_url(_redis_url())
    limiter = RedisLeaseLimiter(_redis_url(), prefix=prefix)
    ((_, score),) = conn.zrange(limiter.key(base_url), 0, -1, withscores=True)
    return int(score)


def _redis_now_ms() -> int:
    seconds, micros = redis.Redis.from_url(_redis_url()).time()
    return int(seconds) * 1000 + int(micros) // 1000


def _until(condition, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    """Wait for a condition; the timeout only bounds a hung test, it is not what the test asserts."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_killed_holder_frees_its_slot_when_its_lease_runs_out(prefix: str) -> None:
    # Everything here is read on Redis's clock from the lease itself; no wall-clock bound is asserted.
    lease_s = 3.0
    lease_ms = int(lease_s * 1000)
    limiter = RedisLeaseLimiter(_redis_url(), lease_s=lease_s, prefix=prefix)
    release = threading.Event()
    with openai_standin(hold=release, hang_s=120) as server:
        (holder,) = _workers(server.base_url, prefix, limit=1, processes=1, threads=1, calls=1, lease_s=lease_s)
        _until(lambda: server.in_flight == 1, "the holder never reached the server")
        first = _lease_expiry_ms(prefix, server.base_url)
        # Held longer than one lease: the holder renews it while its request runs (its expiry moves on,
        # twice, beyond the first lease's end).
        _until(lambda: _lease_expiry_ms(prefix, server.base_url) >= first + lease_ms, "the lease was never renewed")
        assert _redis_now_ms() > first, "the renewed lease outlived its first term"
        with pytest.raises(LimitTimeout):
            with limiter.acquire([server.base_url], 1, timeout=0):
                pass
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        last = _lease_expiry_ms(prefix, server.base_url)
        killed = _redis_now_ms()
        # Nobody renews or releases the slot now: its lease ends within one term of the kill, and the slot is
        # given to the next caller only once Redis's clock has passed that end.
        assert last <= killed + lease_ms
        with limiter.acquire([server.base_url], 1, timeout=60):
            assert _redis_now_ms() >= last
        assert limiter.in_flight(server.base_url) == 0
        release.set()


def test_replicas_share_the_load_and_a_dead_one_is_skipped(prefix: str) -> None:
    # The first replica holds its answers until the second has answered one: the limiter must send work to
    # the second while the first is busy (least in flight), and neither replica gets beyond its two slots.
    second_answered = threading.Event()

    def second_reply(body: dict[str, Any]) -> str:
        second_answered.set()
        return str(default_responder(body))

    with (
        openai_standin(hold=second_answered, hang_s=60) as first,
        openai_standin(second_reply) as second,
    ):
        procs = _workers(f"{first.base_url},{second.base_url}", prefix, limit=2, processes=2, threads=4, calls=3)
        assert _finish(procs) == ["ok"] * 24
        assert first.completions + second.completions == 24
        assert first.completions >= 1 and second.completions >= 1
        assert first.peak_in_flight <= 2 and second.peak_in_flight <= 2

    with openai_standin() as alive:
        dead_port_url = first.base_url  # that server has stopped: connections are refused
        limiter = RedisLeaseLimiter(_redis_url(), prefix=f"{prefix}:dead")
        config = ChatConfig(
            base_url=dead_port_url, base_urls=(dead_port_url, alive.base_url), model="standin-model", max_retries=0
        )
        client = ChatClient(config, limiter=limiter)
        for n in range(3):
            assert client.complete([{"role": "user", "content": f"q{n}"}], use_cache=False).text
        assert alive.completions == 3
