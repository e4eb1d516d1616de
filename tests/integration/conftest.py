"""Fixtures for tests that run a real Celery worker process (see tests/integration/worker.py): every test
here runs on Redis and on RabbitMQ."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.worker import (
    WorkerPool,
    broker_url,
    celery_worker,
    rabbitmq_url,
    worker_broker_url,
    worker_pool,
)

__all__ = ["celery_worker", "celery_workers", "rabbitmq_url", "worker_broker_url"]


@pytest.fixture
def celery_workers(transactional_db: None, tmp_path: Path, worker_broker_url: str) -> Iterator[WorkerPool]:
    with worker_pool(tmp_path, worker_broker_url) as pool:
        yield pool


@pytest.fixture
def redis_workers(transactional_db: None, tmp_path: Path) -> Iterator[WorkerPool]:
    """Workers on Redis only, for tests of what the broker is not part of (the model-server limit and the
    yielding marks live in Redis whichever broker runs the tasks)."""
    with worker_pool(tmp_path, broker_url()) as pool:
        yield pool
