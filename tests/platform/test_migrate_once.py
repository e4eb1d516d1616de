"""Web servers on several hosts starting one release together all migrate (platform/entrypoint.sh) and all
start: each migration is applied once, the others wait and find nothing to do (docs/deploy.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

REPO = Path(__file__).resolve().parents[2]
HOSTS = 3


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


def _production_env(database_url: str, tmp_path: Path) -> dict[str, str]:
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


def test_web_servers_starting_at_once_each_apply_every_migration_once(fresh_database: str, tmp_path: Path) -> None:
    env = _production_env(fresh_database, tmp_path)
    starts = [
        subprocess.Popen(
            [sys.executable, str(REPO / "manage.py"), "migrate", "--noinput"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(HOSTS)
    ]
    ended = [start.communicate(timeout=300) for start in starts]
    for start, (_, stderr) in zip(starts, ended, strict=True):
        assert start.returncode == 0 and "Traceback" not in stderr, stderr[-3000:]
    with psycopg.connect(fresh_database.replace("postgres://", "postgresql://", 1)) as conn:
        applied = conn.execute("SELECT app, name, count(*) FROM django_migrations GROUP BY app, name").fetchall()
    assert applied and all(count == 1 for _, _, count in applied), applied
    # One of them did the work; the others waited for it and found nothing to do.
    assert sum("Applying annotation.0001_initial... OK" in out for out, _ in ended) == 1


def test_a_worker_of_a_new_release_waits_for_the_web_servers_migrations(fresh_database: str, tmp_path: Path) -> None:
    """A worker or beat host of a new release (platform/entrypoint.sh: wait_for_migrations) starts once the web
    servers have migrated, not on the old tables; and one with nobody migrating says why it gave up."""
    env = _production_env(fresh_database, tmp_path)
    manage = [sys.executable, str(REPO / "manage.py")]
    gave_up = subprocess.run(
        [*manage, "wait_for_migrations", "--timeout", "1", "--every", "0.2"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert gave_up.returncode != 0 and "still not applied after 1 s" in gave_up.stderr, gave_up.stderr
    assert "Traceback" not in gave_up.stderr
    worker = subprocess.Popen(
        [*manage, "wait_for_migrations", "--every", "0.2"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    web = subprocess.run([*manage, "migrate", "--noinput"], cwd=tmp_path, env=env, capture_output=True, timeout=300)
    assert web.returncode == 0, web.stderr
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert "Waiting for the web servers to apply" in out and out.rstrip().endswith("Migrations applied: starting.")
    # Once migrated, it returns at once and says nothing.
    again = subprocess.run([*manage, "wait_for_migrations"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout == "", again.stdout
