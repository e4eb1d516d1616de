"""Web servers on several hosts starting one release together all migrate (platform/entrypoint.sh) and all
start: each migration is applied once, the others wait and find nothing to do (docs/deploy.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg

from tests.platform.conftest import REPO, production_env

HOSTS = 3


def test_web_servers_starting_at_once_each_apply_every_migration_once(fresh_database: str, tmp_path: Path) -> None:
    env = production_env(fresh_database, tmp_path)
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
    env = production_env(fresh_database, tmp_path)
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
