"""A real Celery worker process on Redis for tests, pointed at pytest-django's test database.

    with running_worker(broker_url, name="w1") as worker: ...

The worker is `celery -A config worker --pool=prefork` in its own session, so that teardown can
end it and every pool process it forked, and nothing outlives the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
CELERY = Path(sys.executable).with_name("celery")
# A Redis database no other test run uses; override with TEST_WORKER_BROKER_URL.
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/9"
READY_TIMEOUT_S = 30.0


def broker_url() -> str:
    return os.environ.get("TEST_WORKER_BROKER_URL", DEFAULT_BROKER_URL)


def worker_database_url() -> str:
    """The URL of the database this test session really uses (test_<name>), for the worker."""
    from django.db import connection

    s = connection.settings_dict
    user = s.get("USER") or "postgres"
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    host = s.get("HOST") or "127.0.0.1"
    port = s.get("PORT") or "5432"
    if "postgresql" not in s["ENGINE"]:
        pytest.skip("the worker tests need PostgreSQL (a second process shares the test database)")
    return f"postgres://{user}{password}@{host}:{port}/{s['NAME']}"


def flush_broker(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


def _reset_connections(app: Any) -> None:
    from kombu import pools

    pools.reset()  # closes and forgets every pooled broker connection of this process
    app._pool = None
    amqp = app.__dict__.get("amqp")
    if amqp is not None:
        amqp._producer_pool = None


@contextmanager
def celery_app_sending_to(url: str) -> Iterator[Any]:
    """Make this process's Celery app really send tasks to `url` (not run them eagerly)."""
    from config.celery import app

    saved = (app.conf.task_always_eager, app.conf.broker_url)
    # Celery reads CELERY_BROKER_URL from the environment before its own configuration,
    # and config.settings.test sets it, so the variable has to change too.
    saved_env = os.environ.get("CELERY_BROKER_URL")
    _reset_connections(app)
    os.environ["CELERY_BROKER_URL"] = url
    app.conf.task_always_eager = False
    app.conf.broker_url = url
    sending_to = app.connection_for_write().as_uri(include_password=True)
    if sending_to != url:
        raise RuntimeError(f"the Celery app would send to {sending_to}, not {url}")
    try:
        yield app
    finally:
        _reset_connections(app)
        app.conf.task_always_eager, app.conf.broker_url = saved
        if saved_env is None:
            os.environ.pop("CELERY_BROKER_URL", None)
        else:
            os.environ["CELERY_BROKER_URL"] = saved_env


class CeleryWorker:
    """One `celery worker` process; its log is kept for assertions and failure messages."""

    def __init__(self, *, database_url: str, broker: str, log_dir: Path, name: str, concurrency: int = 2) -> None:
        self.name = f"{name}-{uuid.uuid4().hex[:6]}"
        self.hostname = f"{self.name}@localhost"
        self.log_path = log_dir / f"{self.name}.log"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "DATABASE_URL": database_url,
            "CELERY_BROKER_URL": broker,
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "PYTHONUNBUFFERED": "1",
            "LOG_LEVEL": "INFO",
        }
        self.args = [
            str(CELERY), "-A", "config", "worker",
            "--pool=prefork", f"--concurrency={concurrency}", "-Q", "default",
            "-n", self.hostname, "--loglevel=INFO",
            # Nothing to synchronise with in a test: skip the start-up handshakes.
            "--without-mingle", "--without-gossip", "--without-heartbeat",
        ]  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None
        self.signalled = False

    def start(self) -> CeleryWorker:
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                self.args, cwd=REPO_ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"celery worker exited with {self.process.returncode}:\n{self.log()}")
            if " ready." in self.log():
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"celery worker not ready after {READY_TIMEOUT_S:.0f}s:\n{self.log()}")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def pool_processes(self) -> list[int]:
        """The prefork children that run the tasks."""
        children = Path(f"/proc/{self.pid}/task/{self.pid}/children")
        if children.exists():
            return [int(p) for p in children.read_text().split()]
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.pid:
                found.append(int(stat.parent.name))
        return found

    def kill_pool_processes(self) -> list[int]:
        pids = self.pool_processes()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        return pids

    def shut_down(self, *, warm: bool = False) -> None:
        """Ask for a warm shutdown (SIGTERM: finish running tasks, give back reserved ones) or a cold
        one (SIGQUIT: give back every unacknowledged task at once), without waiting."""
        if self.process is not None and self.process.poll() is None and not self.signalled:
            self.process.send_signal(signal.SIGTERM if warm else signal.SIGQUIT)
            self.signalled = True

    def stop(self, *, warm: bool = False, grace: float = 1.0) -> None:
        """Shut down, then SIGKILL whatever of the worker's session is left after `grace` seconds.
        Billiard's pool takes seconds to wind down; at teardown nothing is running, so one will do."""
        if self.process is None:
            return
        self.shut_down(warm=warm)
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.pid, signal.SIGKILL)  # only this worker's own session
        except ProcessLookupError:
            pass
        self.process.wait(timeout=5)


class WorkerPool:
    """Starts workers for one test and guarantees they are all gone at teardown."""

    def __init__(self, *, database_url: str, broker: str, log_dir: Path) -> None:
        self.database_url = database_url
        self.broker = broker
        self.log_dir = log_dir
        self.workers: list[CeleryWorker] = []

    def start(self, name: str = "worker") -> CeleryWorker:
        worker = CeleryWorker(database_url=self.database_url, broker=self.broker, log_dir=self.log_dir, name=name)
        self.workers.append(worker)
        return worker.start()

    def stop_all(self) -> None:
        for worker in self.workers:
            worker.stop()

    def idle(self, worker: CeleryWorker, queue: str = "default") -> bool:
        """Nothing left to do: the queue is empty, no message is out unacknowledged, and the worker
        is running, holding or scheduling no task."""
        import redis
        from celery import current_app

        client = redis.Redis.from_url(self.broker)
        try:
            if client.llen(queue) or client.hlen("unacked"):
                return False
        finally:
            client.close()
        inspect = current_app.control.inspect(destination=[worker.hostname], timeout=2.0, limit=1)
        for held in (inspect.active(), inspect.reserved(), inspect.scheduled()):
            if held is None or any(held.values()):
                return False
        return True

    def logs(self) -> str:
        return "\n".join(f"--- {w.name}\n{w.log()}" for w in self.workers)


def wait_for(
    predicate: Callable[[], Any], *, timeout: float, interval: float = 0.2, message: str | Callable[[], str] = ""
) -> Any:
    """Poll until predicate() is truthy; fail the test with `message` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail((message() if callable(message) else message) or f"condition not met within {timeout}s")
        time.sleep(interval)


@pytest.fixture
def celery_workers(transactional_db: None, tmp_path: Path) -> Iterator[WorkerPool]:
    """A fresh Redis database, this process sending real tasks to it, and a way to start workers."""
    url = broker_url()
    flush_broker(url)
    pool = WorkerPool(database_url=worker_database_url(), broker=url, log_dir=tmp_path)
    with celery_app_sending_to(url):
        try:
            yield pool
        finally:
            pool.stop_all()
            flush_broker(url)


@pytest.fixture
def celery_worker(celery_workers: WorkerPool) -> CeleryWorker:
    """One running worker (prefork, two pool processes, queue "default")."""
    return celery_workers.start("worker")
