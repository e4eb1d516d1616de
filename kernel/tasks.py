"""Enqueueing background work by task name: a task is sent only once the transaction that wrote its rows commits.

A service names the task it enqueues ("annotation.tasks.generate_candidate") and never imports its module: the
tasks import the services they call, so the reverse import would be a cycle (docs/architecture.md)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from celery import Task as CeleryTask
from celery import current_app
from celery.canvas import Signature
from django import db
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

logger = logging.getLogger(__name__)


def task_signature(name: str, *args: Any, app: Any = None) -> Signature:
    """The call `name(*args)` of the task registered under `name`, sent when applied as the task itself sends
    it: its queue from the routes (CELERY_TASK_ROUTES, by name), its priority from `OrderedTask`, in-process
    under CELERY_TASK_ALWAYS_EAGER. A name this process has not registered yet has every app's tasks module
    imported first, as a worker imports them when it starts; a name no app registers is a LookupError here,
    not a message no worker would take."""
    app = app or current_app
    if name not in app.tasks:
        app.autodiscover_tasks(force=True)  # imports every installed app's tasks module, as a worker does
    if name not in app.tasks:
        raise LookupError(f"no Celery task is registered as {name!r}")
    return app.signature(name, args=args)


def enqueue_on_commit(
    task_name: str,
    *args: Any,
    on_sent: Callable[[], None] | None = None,
    on_send_failed: Callable[[], None] | None = None,
) -> None:
    """Send the task registered as `task_name` with `args` (`task_signature`) after the current transaction
    commits, so a worker never sees a row that is not committed yet (outside a transaction it is sent at
    once; after a rollback, never).

    The rows are committed by then, so a broker that cannot be reached must not turn the request into a
    500: the failure is logged at error and `on_send_failed` may record it; the periodic sweepers send
    work whose message never arrived (docs/backends.md, "Sweepers")."""
    signature = task_signature(task_name, *args)  # a misspelt name fails here, in the caller's transaction

    def send() -> None:
        try:
            signature.apply_async()
        except Exception:  # kombu's OperationalError, redis/amqp connection errors: whatever an outage raises
            logger.exception("could not send %s%r to the broker; a sweeper will send it again", task_name, args)
            if on_send_failed is not None:
                on_send_failed()
            return
        if on_sent is not None:
            on_sent()

    transaction.on_commit(send)


def broker_warm(*, app: Any) -> float:
    """Open a Celery app's broker connection now rather than at the first send: import the broker's
    transport (the `redis` package alone takes most of a second to import on a small host), bind the tasks
    and resolve the result backend, connect one producer and declare the task queues on it, and leave it in the app's producer
    pool, where the first `delay` finds it. For a web worker just after it starts (platform/gunicorn.conf.py):
    without it the first question a fresh worker takes waits 0.4-1.2 s for all of this.

    Returns the seconds it took. Never raises: a broker that is down now costs the first send its usual
    error handling (`enqueue_on_commit`), not the web worker's start."""
    started = time.perf_counter()
    try:
        app.finalize(auto=True)  # binds the tasks imported so far (at the first send otherwise)
        app.backend  # noqa: B018 - resolving it scans the installed packages' entry points, even for none
        with app.producer_or_acquire() as producer:
            producer.connection.ensure_connection(max_retries=1)
            for queue in app.amqp.queues.values():
                producer.maybe_declare(queue)
    except Exception:  # whatever an unreachable broker raises: the first send reports it again
        logger.warning("could not open the broker connection ahead of the first send", exc_info=True)
    return time.perf_counter() - started


# --- the order of annotator work --------------------------------------------------------------------
# Retrievals have a queue of their own (RETRIEVAL_QUEUE, docs/deploy.md "Queues"), so that one never waits
# behind generations held by a slow model server. Where one queue carries both (RETRIEVAL_QUEUE set to
# ANNOTATOR_QUEUE, or routes that send both to one queue), the order below applies. In the order sent, a burst of
# questions (a class starting together, a sweep re-sending a backlog) would be retrieved all before any
# summary is written: every annotator waits for every retrieval, and the model server idles meanwhile
# (bench/generation.py: 1.8 s of 9 s with almost no model call at 100 questions). Sent "first", a question's
# generations go ahead of retrievals still waiting, so the workers finish the questions they started and
# retrieve the next one whenever no generation is waiting.
#
# Brokers count priorities the opposite way: Redis (kombu's emulation, one list per priority step, served
# lowest number first, steps 0, 3, 6, 9) and RabbitMQ (highest first, only on a queue declared with
# x-max-priority: config/settings/base.py declares the annotator queue with 1). The number is chosen at
# send time from the broker the app sends to; other transports (the demo's filesystem broker) keep the
# order sent.
FIRST, LATER = "first", "later"
_PRIORITIES = {
    "redis": {FIRST: 0, LATER: 3},
    "amqp": {FIRST: 1, LATER: 0},
}


def broker_priority(app: Any, order: str) -> int | None:
    """The message priority that puts work `order` (FIRST or LATER) where it belongs on `app`'s broker."""
    scheme = str(app.conf.broker_url or "").split("://", 1)[0]
    family = {"redis": "redis", "rediss": "redis", "amqp": "amqp", "amqps": "amqp", "pyamqp": "amqp"}.get(scheme)
    return _PRIORITIES[family][order] if family else None


class OrderedTask(CeleryTask):
    """A Celery task sent with the priority of its `order` on the broker it goes to (see above)."""

    order: str = LATER

    def apply_async(self, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        priority = broker_priority(self.app, self.order)
        if priority is not None:
            options.setdefault("priority", priority)
        return super().apply_async(args, kwargs, **options)


# --- a broker that restarted, or a worker that died ------------------------------------------------
# A Redis without persistence forgets every queued message when it restarts (RabbitMQ's durable queues keep
# theirs). The work those messages carried is still in the database, queued, and stamped with when it was
# sent: work sent before the broker started is sent again by the sweepers at their next run, rather than
# after their fallback windows (docs/backends.md, "Sweepers"). Sending it again is harmless where the message
# was not lost after all: every task claims its row under a lease before it works.
#
# A worker killed outright (SIGKILL, the OOM killer, a host gone) loses the messages it held in the same way on
# Redis: a task waiting for its retry's countdown, one received and not yet started or not yet claimed. Redis
# keeps them unacknowledged until its visibility timeout (REDIS_VISIBILITY_TIMEOUT_S, 2 h), and their rows are
# queued with no lease that could lapse, so only the 10-minute fallback window sent them again (what can leave
# an annotator waiting more than a minute after the annotator worker was killed and started again: 2 of 300 in
# the field run). Each worker now says in the broker when it started (`worker_started`, at `worker_ready`), and
# for work that claims its row under a lease (summaries, searches, research jobs: `lost_if_sent_before`) a
# worker's start counts as the broker's: what was sent before it is sent again at the next sweep, and a copy
# of a message that was only waiting finds its row claimed. Scoring runs keep to the broker's start
# (`broker_started_at`): a chunk claims nothing, and one sent twice would be judged twice; a chunk a killed
# worker held is sent again when its run's lease lapses. (RabbitMQ hands a dead consumer's unacknowledged
# messages out again as soon as its connection drops.)
_broker_clients: dict[str, Any] = {}
WORKER_STARTED_KEY = "satisfy:worker-started"


def _broker_redis(app: Any) -> tuple[Any, str] | None:
    """A client of the Redis the tasks are sent through, and the key prefix of the broker's keys; None for other
    brokers."""
    url = str(app.conf.broker_url or "")
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return None
    client = _broker_clients.get(url)
    if client is None:
        import redis  # the broker's client takes most of a second to import: only where Redis is the broker

        client = redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)
        _broker_clients[url] = client
    prefix = str((app.conf.broker_transport_options or {}).get("global_keyprefix") or "")
    return client, prefix


def _started_ago(app: Any) -> tuple[float, float | None] | None:
    """Seconds since the broker's Redis started, and since a worker last said it started (None: none has); read
    on the broker's clock, so hosts' clocks may differ. None for other brokers, or when it cannot be reached."""
    try:
        found = _broker_redis(app)
        if found is None:
            return None
        client, prefix = found
        with client.pipeline(transaction=False) as pipe:
            pipe.info("server")
            pipe.time()
            pipe.get(prefix + WORKER_STARTED_KEY)
            info, (seconds, microseconds), worker = pipe.execute()
    except Exception:  # noqa: BLE001 - whatever an unreachable broker raises: the next sweep asks again
        logger.warning("could not ask the broker when it started", exc_info=True)
        return None
    worker_ago = None if worker is None else max(0.0, seconds + microseconds / 1e6 - float(worker))
    return float(info["uptime_in_seconds"]), worker_ago


def _ago(seconds: float) -> datetime:
    # Rounded down a second, so that a message sent in the same second counts as sent before.
    return timezone.now() - timedelta(seconds=int(seconds) + 1)


def broker_started_at(*, app: Any = None) -> datetime | None:
    """When the Redis the tasks are sent through last started (from its uptime); None for other brokers, or when
    it cannot be reached (then nothing is sent now: the sweepers run again once it is back)."""
    found = _started_ago(app or current_app)
    return None if found is None else _ago(found[0])


def messages_lost_at(*, app: Any = None) -> datetime | None:
    """When messages waiting for a worker were last lost for sure or may have been: the broker's Redis started, or
    a worker started (`worker_started`: its predecessor may have been killed holding messages), whichever is
    later; None as for `broker_started_at`."""
    found = _started_ago(app or current_app)
    if found is None:
        return None
    broker_ago, worker_ago = found
    return _ago(broker_ago if worker_ago is None else min(broker_ago, worker_ago))


def worker_started(*, app: Any = None) -> None:
    """Say in the broker (Redis) that a worker has just started taking tasks: the messages a killed one held are
    sent again at the next sweep (above). Called by every worker once it is ready (config/celery.py). Never
    raises: a worker starts regardless, and its predecessor's work waits for the fallback windows."""
    app = app or current_app
    try:
        found = _broker_redis(app)
        if found is None:
            return
        client, prefix = found
        seconds, microseconds = client.time()
        client.set(prefix + WORKER_STARTED_KEY, f"{seconds + microseconds / 1e6:.6f}")
    except Exception:  # noqa: BLE001 - an unreachable broker: the worker's consumer retries; nothing to stamp now
        logger.warning("could not tell the broker that this worker started", exc_info=True)


def lost_if_sent_before(*, window: timedelta, now: datetime, app: Any = None) -> datetime:
    """The send time before which work still waiting for a worker may have lost its message: when the
    broker or a worker last started (`messages_lost_at`), or `window` ago (the fallback, for brokers that
    cannot say), whichever is later."""
    started = messages_lost_at(app=app)
    return max(now - window, started) if started is not None else now - window


def unreachable_service(error: BaseException) -> bool:
    """Whether `error` says a broker, a Redis (the model-server limiter, a shared cache) or the database could not
    be reached right now (restarting, failing over; for the database also no connection free in the process's pool
    within DATABASE_POOL_TIMEOUT_S): a fault a retry with backoff outlives. The field test (issue 30) lost 10
    summaries for good to a PostgreSQL restart of 3 s: "couldn't get a connection after 5.00 sec"."""
    kinds: tuple[type[BaseException], ...] = (
        OperationalError,
        ConnectionError,
        TimeoutError,
        db.OperationalError,
        db.InterfaceError,
    )
    try:
        import redis  # most of a second to import (see broker_started_at); absent without the redis extra
    except ImportError:  # pragma: no cover - the broker's client ships with the platform
        pass
    else:
        kinds += (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
    return isinstance(error, kinds)
