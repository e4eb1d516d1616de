"""Deployment checks (`python manage.py check --deploy`): the embedded defaults that serve one host only.

Production settings start without DATABASE_URL or CELERY_BROKER_URL (a fresh clone's `gunicorn` runs on the
SQLite file and kombu's filesystem broker, tests/newcomer/test_fresh_clone.py). On one host of several that
is quiet and wrong: its annotators' answers go to a file no other host reads, and its tasks to a folder only
its own workers see. `check --deploy`, run on each host (docs/deploy.md), says so; and of a cache in one process's memory, where
the API's request rates (kernel/throttling.py) would be counted per process."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage
from django.core.checks import Error as CheckError
from django.core.checks import Warning as CheckWarning
from django.core.files.base import ContentFile
from django.core.files.storage import storages


def embedded_defaults(app_configs: Any = None, **kwargs: Any) -> list[CheckWarning]:
    found = []
    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3"):
        found.append(
            CheckWarning(
                f"The database is the SQLite file {database['NAME']}, which no other host sees.",
                hint="Set DATABASE_URL to the PostgreSQL server every host shares (platform/env.example).",
                id="satisfy.W001",
            )
        )
    if str(settings.CELERY_BROKER_URL).startswith("filesystem://"):
        found.append(
            CheckWarning(
                "The task broker is a folder on this host (kombu's filesystem transport): only workers on this "
                "host take its tasks.",
                hint="Set CELERY_BROKER_URL to the Redis or RabbitMQ server every host shares.",
                id="satisfy.W002",
            )
        )
    cache = settings.CACHES["default"]["BACKEND"]
    if cache.endswith(("locmem.LocMemCache", "dummy.DummyCache")):
        found.append(
            CheckWarning(
                "The default cache is in each process's own memory: the API's request rates are counted per "
                "process, so a client gets the rate once for every web process (and every host).",
                hint="Set CACHE_URL to the Redis every host shares (platform/env.example; docs/api.md).",
                id="satisfy.W003",
            )
        )
    return found


def research_storage(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The S3 bucket of research outputs exists and takes a write (a probe put and deleted under the deployment's
    prefix); a shared bucket has a prefix; presigned downloads point where browsers can go (docs/deploy.md)."""
    options = settings.STORAGES["research"].get("OPTIONS", {})
    if "bucket_name" not in options:
        return []  # a local folder: nothing to reach
    found: list[CheckMessage] = []
    bucket = options["bucket_name"]
    storage = storages["research"]
    probe = f"research/.deploy-check-{uuid.uuid4().hex}"
    try:
        storage.save(probe, ContentFile(b"satisfy check --deploy\n"))
        storage.delete(probe)
    except Exception as error:  # noqa: BLE001 - botocore raises many kinds; each is the same finding
        found.append(
            CheckError(
                f"The research storage's bucket {bucket!r} cannot be written ({type(error).__name__}: {error}).",
                hint="Create the bucket and give these credentials PutObject, GetObject, ListBucket and DeleteObject "
                "on it (docs/deploy.md, 'Object storage'); check AWS_S3_ENDPOINT_URL.",
                id="satisfy.E003",
            )
        )
    if not options.get("location"):
        found.append(
            CheckWarning(
                f"Research files are stored at the top of the bucket {bucket!r}: a second deployment using the same "
                "bucket writes the same keys, and each one's hourly sweep deletes the other's files.",
                hint="Set RESEARCH_STORAGE_PREFIX to a name of this deployment's own (e.g. its host name).",
                id="satisfy.W004",
            )
        )
    if settings.RESEARCH_DOWNLOAD_REDIRECT and options.get("endpoint_url") and not options.get("public_endpoint_url"):
        found.append(
            CheckWarning(
                f"Downloads redirect to presigned links on AWS_S3_ENDPOINT_URL ({options['endpoint_url']}), the "
                "address the servers use, which browsers may not reach.",
                hint="Set AWS_S3_PUBLIC_ENDPOINT_URL to the store's address as browsers see it, or turn "
                "RESEARCH_DOWNLOAD_REDIRECT off to stream downloads through the web servers.",
                id="satisfy.W005",
            )
        )
    return found


def broker_persistence(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A Redis broker that keeps its messages only in memory loses every queued task when it restarts. The
    sweepers find the work again from its own state within seconds of the broker's return (docs/backends.md,
    "Sweepers"), so this is a warning, not an error: with append-only persistence the restart loses nothing at
    all, and nothing has to be found."""
    url = str(settings.CELERY_BROKER_URL)
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return []  # RabbitMQ keeps durable queues on disk; the filesystem broker is a folder (W002)
    import redis  # only with a Redis broker

    client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
    try:
        try:
            config = {**client.config_get("appendonly"), **client.config_get("save")}
            append_only = str(config.get("appendonly", "")).lower() == "yes"
            snapshots = str(config.get("save", "")).strip()
        except redis.exceptions.ResponseError:  # CONFIG is turned off (a managed Redis): INFO says as much
            info = client.info("persistence")
            append_only, snapshots = bool(info.get("aof_enabled")), "unknown"
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as error:
        return [
            CheckError(
                f"The broker cannot be reached ({type(error).__name__}: {error}).",
                hint="Start it, or set CELERY_BROKER_URL to the broker every host shares.",
                id="satisfy.E004",
            )
        ]
    finally:
        client.close()
    if append_only:
        return []
    kept = f"snapshots only (save {snapshots!r})" if snapshots else "in memory only"
    return [
        CheckWarning(
            f"The broker's Redis keeps queued tasks {kept}: a restart loses the messages waiting in it, and the "
            "sweepers send that work again once it is back (within seconds, docs/backends.md 'Sweepers').",
            hint="Run the broker's Redis with append-only persistence (appendonly yes; docker-compose.yml does), so "
            "a restart loses nothing; docs/deploy.md, 'Brokers'.",
            id="satisfy.W006",
        )
    ]
