"""Fixtures of the platform tests: an empty PostgreSQL database of a new deployment, and the environment of a
production process on it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh_database() -> Iterator[str]:
    """An empty PostgreSQL database of its own (dropped afterwards), as a new deployment's."""
    db = settings.DATABASES["default"]
    server = {"host": db["HOST"], "port": db["PORT"] or 5432, "user": db["USER"], "password": db["PASSWORD"]}
    name = f"migrate_once_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dbname="postgres", autocommit=True, **server) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{server['port']}/{name}"
    finally:
        with psycopg.connect(dbname="postgres", autocommit=True, **server) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def production_env(database_url: str, tmp_path: Path) -> dict[str, str]:
    """A production process's environment on the fresh database (no .env, an in-memory broker)."""
    return {
        **{k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "ENV_FILE")},
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "SECRET_KEY": "a-test-secret-key-that-is-long-enough-for-the-checks-0123456789",
        "ENV_FILE": str(tmp_path / "no.env"),
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": "memory://",
        "PYTHONPATH": str(REPO),
    }
