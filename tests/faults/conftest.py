"""Fixtures of the fault suite: a rig of real Celery workers on Redis and pytest-django's test database,
with a live server and headless Chromium for the cases a browser needs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require
from tests.e2e.conftest import chromium_running
from tests.faults.scenarios import Rig
from tests.integration.worker import WorkerPool, celery_workers, worker_pool  # noqa: F401
from tests.support.postgres import postgres_bin
from tests.support.redis_server import RedisServer, redis_server
from tests.support.site import Site, site_on_own_database


@pytest.fixture
def browser() -> Iterator[Any]:
    """Chromium for one test: most tests of the fault suite need none (see tests/e2e/conftest.py)."""
    with chromium_running() as chromium:
        yield chromium


@pytest.fixture
def rig(celery_workers: WorkerPool) -> Rig:  # noqa: F811
    return Rig(pool=celery_workers)


@pytest.fixture
def browser_rig(celery_workers: WorkerPool, live_server, browser) -> Rig:  # type: ignore[no-untyped-def]  # noqa: F811
    return Rig(pool=celery_workers, live_url=live_server.url, browser=browser)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test's own, on a free port, that the test may stop and start."""
    with redis_server(tmp_path) as server:
        yield server


@pytest.fixture
def restart_rig(transactional_db: None, tmp_path: Path, own_redis: RedisServer) -> Iterator[Rig]:
    """Workers whose broker (and model-server limiter) is `own_redis`; this process sends there too."""
    with worker_pool(tmp_path, own_redis.url) as pool:
        yield Rig(pool=pool)


@pytest.fixture(scope="session")
def own_site() -> Iterator[Site]:
    """The production web server's settings on a PostgreSQL server of the session's own, migrated and seeded
    once (about a minute); each test starts gunicorn with the settings it needs (tests/support/site.py)."""
    require(postgres_bin() is not None, "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin")
    with site_on_own_database() as site:
        yield site
