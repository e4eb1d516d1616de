"""A real prefork worker serves its own metrics on METRICS_PORT, with the token: how long its tasks ran and how
long their messages waited, counted in the pool processes (PROMETHEUS_MULTIPROC_DIR) and added up."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.worker import WorkerPool, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.timeout(60)]
TOKEN = "worker-metrics-token"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _scrape(port: int, token: str) -> dict[tuple[str, str], float]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=5) as response:
        text = response.read().decode()
    found: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, sample.labels.get("task", ""))
            found[key] = found.get(key, 0.0) + sample.value
    return found


def test_a_worker_serves_its_task_timings_and_queue_waits(celery_workers: WorkerPool, tmp_path: Path) -> None:
    from annotation.tasks import sweep_generation

    port = _free_port()
    folder = tmp_path / "metrics"
    folder.mkdir()
    celery_workers.start(
        "metrics",
        extra_env={"METRICS_PORT": str(port), "METRICS_TOKEN": TOKEN, "PROMETHEUS_MULTIPROC_DIR": str(folder)},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        _scrape(port, "wrong")
    assert refused.value.code == 403, celery_workers.logs()[-3000:]
    for _ in range(2):
        sweep_generation.delay()
    name = "annotation.tasks.sweep_generation"
    samples = wait_for(
        lambda: (s := _scrape(port, TOKEN)).get(("satisfy_celery_task_seconds_count", name), 0) >= 2 and s,
        timeout=30,
        message=celery_workers.logs,
    )
    assert samples[("satisfy_celery_task_seconds_count", name)] == 2
    assert samples[("satisfy_celery_task_queue_wait_seconds_count", name)] == 2
    assert samples.get(("satisfy_celery_task_failures_total", name), 0) == 0
