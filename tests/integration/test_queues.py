"""Queues for real: annotator, retrieval and research work on separate queues, each consumed by its own worker
as a deployment runs them: a question is retrieved while the generations wait on a slow model, and a scoring run
keeps at most RESEARCH_MAX_INFLIGHT_CHUNKS unfinished chunks in the broker however many chunks it has (on Redis
and on RabbitMQ)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.conf import settings as django_settings

from annotation.models import Query
from annotation.services.query import query_submit
from scoring import services
from scoring.models import ScoringRun
from studies.models import Study
from tests.annotation.factories import StudyFactory, join
from tests.integration.test_worker import QUESTION, describe, openai_study, settled
from tests.integration.test_worker import ask as ask_openai
from tests.integration.worker import WorkerPool, wait_for
from tests.support.openai_standin import openai_standin

pytestmark = [pytest.mark.worker, pytest.mark.timeout(180)]

INFLIGHT = 3
QUERIES = 5  # x 4 systems = 20 candidates; one candidate per chunk: 20 chunks


def ask(study: Study, n: int) -> Query:
    return query_submit(participation=join(study), text=f"{QUESTION} ({n})", client_token="")


def test_research_work_waits_for_its_own_worker_and_a_long_run_never_floods_the_broker(
    celery_workers: WorkerPool, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    celery_workers.start("annotator", queues=[django_settings.ANNOTATOR_QUEUE, django_settings.RETRIEVAL_QUEUE])
    study = StudyFactory(slug="queued")
    queries = [ask(study, n) for n in range(QUERIES)]
    for query in queries:
        wait_for(lambda q=query: settled(q), timeout=60, message=describe(query, celery_workers))

    monkeypatch.setattr(services, "CHUNK_SIZE", 1)
    settings.RESEARCH_MAX_INFLIGHT_CHUNKS = INFLIGHT
    run = services.scoring_run_start(study=study, metrics=["rouge1"])
    assert (run.total, len(run.chunks)) == (4 * QUERIES, 4 * QUERIES)
    # The annotator worker leaves research work alone: the run waits, and only INFLIGHT chunks are queued.
    time.sleep(2.0)
    run.refresh_from_db()
    assert run.done == 0, celery_workers.logs()
    assert celery_workers.queued() == INFLIGHT, "the run's first chunks, and no more"

    # One pool process: a finished chunk's message is acknowledged after it sent the next (late acks), so two
    # processes finishing together would briefly leave INFLIGHT + 2 in the broker (seen on a loaded host).
    celery_workers.start(
        "research",
        queues=[django_settings.RESEARCH_QUEUE, django_settings.CELERY_TASK_DEFAULT_QUEUE],
        extra_env={"RESEARCH_MAX_INFLIGHT_CHUNKS": str(INFLIGHT)},
        concurrency=1,
    )
    most = 0
    deadline = time.monotonic() + 90
    while ScoringRun.objects.get(pk=run.pk).status == ScoringRun.Status.RUNNING and time.monotonic() < deadline:
        most = max(most, celery_workers.queued())
        time.sleep(0.05)
    run.refresh_from_db()
    # What the researcher sees: every candidate scored once; what the broker held: never more than INFLIGHT.
    assert (run.status, run.done, run.total, run.percent) == (ScoringRun.Status.DONE, 20, 20, 100), (
        celery_workers.logs()[-4000:]
    )
    assert sorted(run.chunks_done) == list(range(20))
    # A counted chunk sends the next before its own message is acknowledged (late acks): for that moment the
    # broker holds INFLIGHT unfinished chunks and the finished one's message. Unbounded, it would hold 20.
    assert 1 <= most <= INFLIGHT + 1


def test_a_new_question_is_retrieved_while_every_generation_slot_waits_on_a_slow_model(
    redis_workers: WorkerPool,
) -> None:
    """Issue 30: with the model server hanging, retrievals waited behind the hanging generations in the one
    annotator queue. Here the annotator worker's 4 slots all wait on a model server that holds every answer,
    and 4 more summaries are queued behind them; a question asked now is retrieved by the retrieval worker (its
    sources stored, its summaries queued) within seconds. Redis only: routing is the same on both brokers."""
    redis_workers.start("annotator", pool="threads", concurrency=4, queues=[django_settings.ANNOTATOR_QUEUE])
    redis_workers.start("retrieval", concurrency=1, queues=[django_settings.RETRIEVAL_QUEUE])
    hold = threading.Event()
    with openai_standin(hold=hold, hang_s=60) as standin:
        try:
            study = openai_study(standin, slug="slow-model", timeout=60)
            busy = [ask_openai(study), ask_openai(study)]  # 8 summaries: 4 at the model server, 4 waiting
            wait_for(lambda: standin.in_flight == 4, timeout=30, message=describe(busy[0], redis_workers))
            late = ask_openai(study)
            wait_for(
                lambda: Query.objects.get(pk=late.pk).status == Query.Status.GENERATING,
                timeout=10,
                message=describe(late, redis_workers),
            )
            assert late.documents.count() == 10
            # Still held: the retrieval did not wait for a slot to come free.
            assert standin.in_flight == 4 and standin.completions == 4
        finally:
            hold.set()
        for query in [*busy, late]:
            wait_for(lambda q=query: settled(q), timeout=60, message=describe(query, redis_workers))
    assert all(Query.objects.get(pk=q.pk).status == Query.Status.READY for q in [*busy, late])
