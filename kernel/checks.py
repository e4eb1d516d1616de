"""Deployment checks (`python manage.py check --deploy`): the embedded defaults that serve one host only.

Production settings start without DATABASE_URL or CELERY_BROKER_URL (a fresh clone's `gunicorn` runs on the
SQLite file and kombu's filesystem broker, tests/newcomer/test_fresh_clone.py). On one host of several that
is quiet and wrong: its annotators' answers go to a file no other host reads, and its tasks to a folder only
its own workers see. `check --deploy`, run on each host (docs/deploy.md), says so; and of a cache in one process's memory, where
the API's request rates (kernel/throttling.py) would be counted per process."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Warning as CheckWarning


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
