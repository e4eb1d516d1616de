"""Fixtures for tests that run a real Celery worker process (see tests/integration/worker.py): every test
here runs on Redis and on RabbitMQ."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.worker import WorkerPool, celery_worker, rabbitmq_url, worker_broker_url, worker_pool

__all__ = ["celery_worker", "celery_workers", "rabbitmq_url", "worker_broker_url"]


@pytest.fixture
def celery_workers(transactional_db: None, tmp_path: Path, worker_broker_url: str) -> Iterator[WorkerPool]:
    with worker_pool(tmp_path, worker_broker_url) as pool:
        yield pool
