"""The annotator worker as docker-compose.yml runs it (issue 30): one process, a threads pool, as many slots as the
model server takes. The field test's 4 prefork processes, each holding one generation for its whole latency,
put at most 10 of the server's 64 slots to work. Here 16 summaries wait on the model server at once in one
worker process whose database pool holds 4 connections: a generation gives its connection back while it waits
(kernel.db.connection_release), and so does its lease heartbeat between beats. Redis only: the broker is not
what is tested."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db import connection

from annotation.models import Candidate, Query
from tests.integration.test_worker import ask, describe, openai_study, settled
from tests.integration.worker import WorkerPool, broker_url, wait_for, worker_database_url
from tests.support.openai_standin import openai_standin

pytestmark = [pytest.mark.worker, pytest.mark.timeout(180)]

APPLICATION = "threads-worker-test"


def _worker_connections() -> int:
    """Connections the worker holds open on the server now (its pool's, named by application_name)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [APPLICATION])
        return int(cursor.fetchone()[0])


def test_sixteen_summaries_wait_on_the_model_at_once_in_one_process_of_four_connections(
    redis_workers: WorkerPool,
) -> None:
    url = worker_database_url()
    redis_workers.start(
        "threads",
        pool="threads",
        concurrency=16,
        queues=[django_settings.ANNOTATOR_QUEUE, django_settings.RETRIEVAL_QUEUE],
        extra_env={
            "DATABASE_URL": f"{url}?application_name={APPLICATION}",
            "DATABASE_POOL_MAX_SIZE": "4",
            "BACKGROUND_HEARTBEAT_S": "1",  # beats while the summaries wait: their connections counted too
            "MODEL_SERVER_LIMIT_URL": broker_url(),
        },
    )
    release = threading.Event()

    def respond(body: dict[str, Any]) -> str:
        release.wait(120)
        return "The sources agree on the main finding [1]."

    with openai_standin(respond, hang_s=120) as standin:
        try:
            study = openai_study(standin, slug="threads", timeout=120, concurrency=16)
            queries = [ask(study) for _ in range(4)]  # four annotators: 16 summaries
            wait_for(lambda: standin.in_flight == 16, timeout=60, message=describe(queries[0], redis_workers))
            # Three seconds of beats (every second per summary) while all 16 wait: the pool's 4 at most.
            held = []
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline:
                held.append(_worker_connections())
                time.sleep(0.1)
            assert 1 <= max(held) <= 4, held
            assert standin.in_flight == 16
        finally:
            release.set()
        for query in queries:
            wait_for(lambda q=query: settled(q), timeout=60, message=describe(query, redis_workers))
    assert [Query.objects.get(pk=q.pk).status for q in queries] == [Query.Status.READY] * 4
    # One attempt each: no summary waited for a connection long enough to fail and be retried.
    rows = Candidate.objects.filter(query__in=queries)
    assert sorted(rows.values_list("attempts", flat=True)) == [1] * 16
    assert standin.completions == 16
