"""A real Celery worker process for tests, on Redis or RabbitMQ, pointed at pytest-django's test database.

    with running_worker(broker_url, name="w1") as worker: ...

The worker is `celery -A config worker --pool=prefork` (or `pool="threads"`) in its own session, so that teardown can
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

from tests.support.zygote import Forked, spawn

REPO_ROOT = Path(__file__).resolve().parents[2]
CELERY = Path(sys.executable).with_name("celery")
# A Redis database no other test run uses; override with TEST_WORKER_BROKER_URL.
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/9"
# RabbitMQ (guest/guest on this machine; override with TEST_WORKER_AMQP_URL, a URL without a vhost): each
# test session gets a vhost of its own (rabbitmqctl), so parallel runs never share a queue.
DEFAULT_AMQP_URL = "amqp://guest:guest@127.0.0.1:5672"
READY_TIMEOUT_S = 30.0
BROKERS = ["redis", "rabbitmq"]


def broker_url() -> str:
    return os.environ.get("TEST_WORKER_BROKER_URL", DEFAULT_BROKER_URL)


def redis_key_prefix() -> str:
    """The prefix of every broker key this test process and its workers write to Redis: "pytest:" in a plain
    run, "gw0:", "gw1:", ... under pytest-xdist, "" for bench/ scripts (config/settings/test.py gives it to Celery as its
    global_keyprefix), so that parallel test processes share the one Redis database and each flushes only
    its own keys."""
    from django.conf import settings

    return str(getattr(settings, "TEST_REDIS_KEY_PREFIX", ""))


def _rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)


@contextmanager
def rabbitmq_vhost() -> Iterator[str]:
    """An AMQP URL on a fresh vhost of this session's own, deleted afterwards."""
    vhost = f"satisfy-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    _rabbitmqctl("add_vhost", vhost)
    try:
        _rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
        yield f"{os.environ.get('TEST_WORKER_AMQP_URL', DEFAULT_AMQP_URL).rstrip('/')}/{vhost}"
    finally:
        _rabbitmqctl("delete_vhost", vhost)


def all_queues() -> list[str]:
    """Every queue the routes name (config/settings/base.py): what one worker consumes by default."""
    from django.conf import settings

    return [queue.name for queue in settings.CELERY_TASK_QUEUES]


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
    if url.startswith("amqp"):
        from kombu import Connection

        with Connection(url) as connection:
            channel = connection.default_channel
            for queue in all_queues():
                try:
                    channel.queue_purge(queue)
                except Exception:  # noqa: BLE001 - not declared yet: nothing to purge
                    channel = connection.channel()
        return
    import redis

    client = redis.Redis.from_url(url)
    try:
        prefix = redis_key_prefix()
        if not prefix:
            client.flushdb()
            return
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
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

    def __init__(
        self,
        *,
        database_url: str,
        broker: str,
        log_dir: Path,
        name: str,
        concurrency: int = 2,
        queues: list[str] | None = None,
        extra_env: dict[str, str] | None = None,
        nice: int | None = None,
        pool: str = "prefork",
    ) -> None:
        self.queues = queues or all_queues()
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
            **(extra_env or {}),
        }
        self.args = [
            str(CELERY), "-A", "config", "worker",
            f"--pool={pool}", f"--concurrency={concurrency}", "-Q", ",".join(self.queues),
            "-n", self.hostname, "--loglevel=INFO",
            # Nothing to synchronise with in a test: skip the start-up handshakes.
            "--without-mingle", "--without-gossip", "--without-heartbeat",
        ]  # fmt: skip
        if nice is not None:  # a lower CPU priority, as platform/celery-worker.sh's WORKER_NICE
            self.args = ["nice", "-n", str(nice), *self.args]
        self.process: subprocess.Popen[bytes] | Forked | None = None
        self.signalled = False

    def start(self) -> CeleryWorker:
        if self.args[0] == str(CELERY):
            # Forked from a process that imported the libraries already (tests/support/zygote.py): seconds of
            # CPU less per worker; the same process, session and log as the Popen below.
            self.process = spawn(self.args, env=self.env, cwd=REPO_ROOT, output=self.log_path)
        else:
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

    def start(self, name: str = "worker", **options: Any) -> CeleryWorker:
        worker = CeleryWorker(
            database_url=self.database_url, broker=self.broker, log_dir=self.log_dir, name=name, **options
        )
        self.workers.append(worker)
        return worker.start()

    def stop_all(self, *, grace: float = 1.0) -> None:
        """Every worker asked at once, so that their grace periods run together, not one after another."""
        for worker in self.workers:
            worker.shut_down()
        deadline = time.monotonic() + grace
        for worker in self.workers:
            worker.stop(grace=max(0.0, deadline - time.monotonic()))

    def queued(self) -> int:
        """Messages waiting in the broker, over every queue (with Redis, unacknowledged ones too)."""
        if self.broker.startswith("amqp"):
            from kombu import Connection

            with Connection(self.broker) as connection:
                total = 0
                for queue in all_queues():
                    try:
                        total += connection.default_channel.queue_declare(queue, passive=True).message_count
                    except Exception:  # noqa: BLE001 - not declared yet: empty
                        connection.close()
                        connection.connect()
                return total
        import redis

        client = redis.Redis.from_url(self.broker)
        prefix = redis_key_prefix()
        try:
            # One MULTI/EXEC: a message moving from its queue to "unacked" is counted once.
            with client.pipeline(transaction=True) as pipe:
                for queue in all_queues():
                    # kombu keeps one list per priority step: the queue's own name for step 0, then
                    # "<queue>\x06\x16<step>" (kernel/tasks.py sends retrievals at step 3).
                    for key in (queue, *(f"{queue}\x06\x16{step}" for step in (3, 6, 9))):
                        pipe.llen(f"{prefix}{key}")
                pipe.hlen(f"{prefix}unacked")
                return sum(int(n) for n in pipe.execute())
        finally:
            client.close()

    def idle(self, worker: CeleryWorker) -> bool:
        """Nothing left to do: the queues are empty, no message is out unacknowledged, and the worker
        is running, holding or scheduling no task."""
        from celery import current_app

        if self.queued():
            return False
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


@contextmanager
def worker_pool(tmp_path: Path, url: str) -> Iterator[WorkerPool]:
    """A fresh broker (Redis database or RabbitMQ vhost), this process sending real tasks to it, and a way
    to start workers, every one of them gone at the end."""
    flush_broker(url)
    pool = WorkerPool(database_url=worker_database_url(), broker=url, log_dir=tmp_path)
    with celery_app_sending_to(url):
        try:
            yield pool
        finally:
            pool.stop_all()
            flush_broker(url)


@pytest.fixture(scope="session")
def rabbitmq_url() -> Iterator[str]:
    with rabbitmq_vhost() as url:
        yield url


@pytest.fixture(params=BROKERS)
def worker_broker_url(request: pytest.FixtureRequest) -> str:
    """Each real-worker test of tests/integration runs on both brokers of a deployment: Redis and RabbitMQ."""
    if request.param == "rabbitmq":
        return str(request.getfixturevalue("rabbitmq_url"))
    return broker_url()


@pytest.fixture
def celery_workers(transactional_db: None, tmp_path: Path) -> Iterator[WorkerPool]:
    """Workers on Redis (tests/integration's conftest runs its tests on both brokers)."""
    with worker_pool(tmp_path, broker_url()) as pool:
        yield pool


@pytest.fixture
def celery_worker(celery_workers: WorkerPool) -> CeleryWorker:
    """One running worker (prefork, two pool processes, every queue)."""
    return celery_workers.start("worker")
