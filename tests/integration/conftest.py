"""Fixtures for tests that run a real Celery worker process (see tests/integration/worker.py)."""

from tests.integration.worker import celery_worker, celery_workers  # noqa: F401
