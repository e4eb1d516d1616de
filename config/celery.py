"""The Celery application: one per process, configured from Django settings."""

import functools
import logging
import os
import threading
from typing import Any

import redis
from celery import Celery
from celery.exceptions import WorkerTerminate
from celery.platforms import EX_FAILURE
from celery.signals import (
    beat_init,
    before_task_publish,
    task_failure,
    task_postrun,
    task_prerun,
    task_retry,
    worker_init,
    worker_process_shutdown,
    worker_ready,
)
from celery.worker.consumer import Consumer
from django.conf import settings
from django.db import close_old_connections, connection
from kombu.transport import redis as kombu_redis
from prometheus_client import multiprocess

from config import monitoring
from kernel.beat_lock import beat_lock_acquire
from kernel.tasks import worker_started
from kernel.yielding import annotator_work_began, annotator_work_ended

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")

app = Celery("satisfy")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# -- the broker consumer: it recovers from a broker restart, or the worker exits (docs/deploy.md, "Brokers") ------

# kombu 5.7.0 (the latest release; 5.6 alike): a Redis channel closed after its connection builds a new connection
# pool from `self.connection.client`, which `kombu.Connection.close` has set to None, and fails with
# AttributeError("'NoneType' object has no attribute 'hostname'"). A worker meets it when its Redis goes away while a
# late-acked task runs and a process is free (a BRPOP outstanding), and the remote-control connection notices first:
# Celery's reconnect has kombu collect the connection, where the task channel's close fails on the BRPOP (left
# open) and the transport is detached; then it closes the connection again, and the task channel's close, putting
# its unacknowledged message back, fails so. Celery does not take that for a connection error: "Unrecoverable
# error", and the worker receives nothing again. The same error on another channel's close: celery/kombu#582; no
# release fixes it. Here a channel keeps the parameters it opened with and uses them once its connection is
# closed: its close then fails with a connection error while the broker is down (or puts the message back once it
# is up), as when the loss is noticed on the BRPOP, and the consumer reconnects. tests/faults/test_broker_restart.py
# causes it; tests/platform/test_kombu_patch.py fails when kombu's code changes shape.
_KOMBU_CONNPARAMS = kombu_redis.Channel._connparams


@functools.wraps(_KOMBU_CONNPARAMS)
def _connparams_after_close(self: kombu_redis.Channel, asynchronous: bool = False) -> dict[str, Any]:
    opened_with: dict[bool, dict[str, Any]] = self.__dict__.setdefault("_satisfy_opened_with", {})
    transport = self.connection
    if transport is None or transport.client is None:  # the connection was closed
        if asynchronous not in opened_with:
            raise redis.ConnectionError("the broker connection of this channel was closed")
        return dict(opened_with[asynchronous])
    params: dict[str, Any] = _KOMBU_CONNPARAMS(self, asynchronous=asynchronous)
    opened_with[asynchronous] = dict(params)
    return params


kombu_redis.Channel._connparams = _connparams_after_close  # type: ignore[method-assign]

# A worker whose consumer stopped for good exits at most this long after, whatever its pool does (the running
# tasks of a thread pool cannot be ended, and the interpreter waits for them).
CONSUMER_STOPPED_EXIT_S = 10.0


class ExitingConsumer(Consumer):
    """Celery's consumer, except that an error it does not recover from ends the worker process within seconds.

    Celery's own logs "Unrecoverable error" and shuts down warm, which waits for the running tasks: the worker
    receives nothing more but lives on until its longest task ends, minutes behind a slow model server, and its
    supervisor (docker-compose.yml's `restart: unless-stopped`) has no exit to act on. This one ends the pool's
    processes (a cold shutdown) and exits with 1; the sweepers send their work again from its own state
    (docs/backends.md, "Sweepers"). CELERY_WORKER_CONSUMER names it."""

    def start(self) -> None:
        try:
            super().start()
        except Exception as error:
            logging.getLogger(__name__).critical(
                "the broker consumer stopped for good (%r): ending the running tasks and exiting, so that the "
                "supervisor starts the worker again",
                error,
                exc_info=True,
            )
            if self.controller is not None:
                self.controller.exitcode = EX_FAILURE
            _exit_unless_gone_in(CONSUMER_STOPPED_EXIT_S)
            raise WorkerTerminate(EX_FAILURE) from error


def _exit_unless_gone_in(seconds: float) -> None:
    def exit_now() -> None:
        logging.getLogger(__name__).critical("still running %.0f s after the consumer stopped: exiting now", seconds)
        logging.shutdown()
        os._exit(EX_FAILURE)

    timer = threading.Timer(seconds, exit_now)
    timer.daemon = True
    timer.start()


@worker_init.connect
def _load_before_the_pool_forks(**kwargs: Any) -> None:
    """Load, once in the worker's main process, what each pool process would load on its first question: the
    model-server client's HTTP stack and TLS context (about 60 ms of CPU per process, and 30 ms more for
    every model it calls) and the bundled corpus's index. A prefork pool's processes inherit them. Only a
    head start: what cannot be loaded here (a CA bundle that SSL_CERT_FILE names but is missing) is said in
    the log, and the task that needs it fails with the reason, as it would have without this."""
    # Here, not with the settings that import this module: the corpus index loads numpy and scipy, the
    # model-server client the openai package and pydantic (seconds of every process's start otherwise).
    from generation.offline_retrieval import DemoCorpusRetrieval  # numpy, scipy
    from modelserver.client import preload  # openai, pydantic

    for load in (preload, lambda: DemoCorpusRetrieval().index):
        try:
            load()
        except Exception as error:  # noqa: BLE001 - the worker starts regardless; its tasks report the fault
            logging.getLogger(__name__).warning("not loaded before the pool forks: %r", error)


@worker_ready.connect
def _say_this_worker_started(sender: Any = None, **kwargs: Any) -> None:
    """Messages a killed worker held (a retry's countdown, a task not yet started) are sent again at the next sweep
    once a worker is back, not after the 10-minute fallback window (kernel.tasks.worker_started)."""
    worker_started(app=getattr(sender, "app", None))


@beat_init.connect
def _one_beat_per_deployment(**kwargs: Any) -> None:
    """Hold the deployment's beat lock before the first tick; a second beat waits as a standby
    (kernel/beat_lock.py, docs/deploy.md)."""
    beat_lock_acquire(
        settings_dict=dict(connection.settings_dict), vendor=connection.vendor, poll_s=settings.BEAT_LOCK_POLL_S
    )


def _annotator_task(task: Any) -> bool:
    return task is not None and task.name in settings.ANNOTATOR_TASKS and not task.request.is_eager


@task_prerun.connect
def _annotator_work_began(sender: Any = None, task_id: str = "", task: Any = None, **kwargs: Any) -> None:
    """Research work on this host pauses while an annotator task runs (kernel/yielding.py)."""
    if _annotator_task(task):
        annotator_work_began(task_id)


@task_postrun.connect
def _annotator_work_ended(sender: Any = None, task_id: str = "", task: Any = None, **kwargs: Any) -> None:
    if _annotator_task(task):
        annotator_work_ended(task_id)


@task_prerun.connect
@task_postrun.connect
def _database_connections_as_in_a_request(sender: object = None, **kwargs: object) -> None:
    """A task treats the database connection as Django treats it around a request. With the pool (PostgreSQL's
    default, DATABASE_POOL; CONN_MAX_AGE is then 0) the task's connection goes back to the process's pool at
    its end, which keeps it open for the next task and checks it before handing it out again (one the server
    ended is replaced); without it, it is kept for CONN_MAX_AGE, closed when it broke or was left inside a
    transaction, health-checked before its next use (CONN_HEALTH_CHECKS). Celery's Django fixup, which would
    close the connection (and in a prefork pool process, the whole pool) before and after every task, is told
    to leave it alone (CELERY_DB_REUSE_MAX, config/settings/base.py): a new PostgreSQL connection per task
    cost the generation queue more CPU than the task's own statements (bench/README.md, "Generation queue").
    It still closes the pool as each pool process starts, so a forked process never uses its parent's."""
    # An eager task runs inside its caller, whose connection (and transaction) it must leave alone.
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return
    close_old_connections()


# -- metrics (config/monitoring.py, docs/deploy.md "Monitoring") ---------------------------------------------


@before_task_publish.connect
def _stamp_sent_at(headers: dict[str, Any] | None = None, **kwargs: Any) -> None:
    monitoring.task_published(headers)


@task_prerun.connect
def _task_metrics_began(task_id: str = "", task: Any = None, **kwargs: Any) -> None:
    if task is not None:
        monitoring.task_started(task_id=task_id, task=task)


@task_postrun.connect
def _task_metrics_ended(task_id: str = "", task: Any = None, state: str | None = None, **kwargs: Any) -> None:
    monitoring.task_ended(task_id=task_id, task=task, state=state)


@task_retry.connect
def _task_metrics_retried(sender: Any = None, **kwargs: Any) -> None:
    monitoring.task_retried(task=sender)


@task_failure.connect
def _task_metrics_failed(sender: Any = None, **kwargs: Any) -> None:
    monitoring.task_failed(task=sender)


@worker_init.connect
def _serve_worker_metrics(**kwargs: Any) -> None:
    """The worker's metrics on METRICS_PORT (its pool processes' too, through PROMETHEUS_MULTIPROC_DIR)."""
    if settings.METRICS_PORT:
        monitoring.start_worker_metrics_server(settings.METRICS_PORT)


@worker_process_shutdown.connect
def _pool_process_metrics_done(pid: int | None = None, **kwargs: Any) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(pid or os.getpid())
