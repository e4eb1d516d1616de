"""The model-server limit holds across processes: a lease semaphore in Redis, measured at the stand-in.

Real Redis (TEST_WORKER_BROKER_URL or CELERY_BROKER_URL), real worker processes, the stand-in counting
the requests it answers at once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from modelserver import ChatClient, ChatConfig
from modelserver.limits import LimitTimeout, RedisLeaseLimiter
from tests.support.openai_standin import openai_standin

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
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        lines += out.split()
    return lines


def test_a_limit_of_4_holds_across_3_processes_of_4_threads(prefix: str) -> None:
    with openai_standin(delay=0.15) as server:
        procs = _workers(server.base_url, prefix, limit=4, processes=3, threads=4, calls=4)
        lines = _finish(procs)
        assert lines == ["ok"] * 48
        assert server.completions == 48
        # Twelve threads want the server at once; the stand-in never answers more than four together,
        # and does answer four (a limit that let through fewer would fail here too).
        assert server.peak_in_flight == 4


def test_without_a_shared_limit_the_same_load_exceeds_4(prefix: str) -> None:
    """The control: the three processes' own limits of 4 let more than 4 through together."""
    with openai_standin(delay=0.15) as server:
        procs = [
            _workers(server.base_url, f"{prefix}:{n}", limit=4, processes=1, threads=4, calls=4)[0] for n in range(3)
        ]
        _finish(procs)
        assert server.peak_in_flight > 4


def test_a_killed_holder_frees_its_slot_when_its_lease_runs_out(prefix: str) -> None:
    lease_s = 1.5
    limiter = RedisLeaseLimiter(_redis_url(), lease_s=lease_s, prefix=prefix)
    with openai_standin(delay=6.0) as server:
        (holder,) = _workers(server.base_url, prefix, limit=1, processes=1, threads=1, calls=1, lease_s=lease_s)
        deadline = time.monotonic() + 20
        while server.in_flight < 1:
            assert time.monotonic() < deadline, "the holder never reached the server"
            time.sleep(0.05)
        # Held longer than one lease: the holder renews it while its request runs.
        time.sleep(lease_s * 1.5)
        with pytest.raises(LimitTimeout):
            with limiter.acquire([server.base_url], 1, timeout=0.2):
                pass
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        killed = time.monotonic()
        # Nobody releases the slot; the lease runs out within lease_s of the last renewal.
        with limiter.acquire([server.base_url], 1, timeout=lease_s + 2.0):
            waited = time.monotonic() - killed
        assert waited <= lease_s + 1.0
        assert limiter.in_flight(server.base_url) == 0


def test_replicas_share_the_load_and_a_dead_one_is_skipped(prefix: str) -> None:
    with openai_standin(delay=0.1) as first, openai_standin(delay=0.1) as second:
        procs = _workers(f"{first.base_url},{second.base_url}", prefix, limit=2, processes=2, threads=4, calls=3)
        assert _finish(procs) == ["ok"] * 24
        assert first.completions + second.completions == 24
        # Least-in-flight with two slots each: both replicas work, and neither beyond its limit.
        assert first.completions >= 6 and second.completions >= 6
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
