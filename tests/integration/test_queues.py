"""Queues for real: annotator work and research work on separate queues, each consumed by its own worker as
a deployment runs them, a question's summaries written before the next question is retrieved, and a scoring run that keeps at most RESEARCH_MAX_INFLIGHT_CHUNKS unfinished chunks
in the broker however many chunks it has (on Redis and on RabbitMQ)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.conf import settings as django_settings

from annotation.models import Candidate, Query
from annotation.services.query import query_submit
from scoring import services
from scoring.models import ScoringRun
from studies.models import Study
from tests.annotation.factories import StudyFactory, join
from tests.integration.test_worker import QUESTION, describe, settled
from tests.integration.worker import WorkerPool, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.timeout(180)]

INFLIGHT = 3
QUERIES = 5  # x 4 systems = 20 candidates; one candidate per chunk: 20 chunks


def ask(study: Study, n: int) -> Query:
    return query_submit(participation=join(study), text=f"{QUESTION} ({n})", client_token="")


def test_research_work_waits_for_its_own_worker_and_a_long_run_never_floods_the_broker(
    celery_workers: WorkerPool, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    celery_workers.start("annotator", queues=[django_settings.ANNOTATOR_QUEUE])
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


def test_questions_asked_together_are_finished_one_by_one_not_all_retrieved_first(
    celery_workers: WorkerPool,
) -> None:
    """Four annotators ask at the same moment while one worker process serves the queue. Sent in that order,
    all four retrievals would run before any summary: the first annotator would wait for everyone's
    sources. A question's generations go ahead of the retrievals still waiting (kernel/tasks.py), so the
    first question retrieved is ready before the second retrieval ends."""
    study = StudyFactory(slug="one-by-one")
    queries = [ask(study, n) for n in range(4)]  # queued before any worker runs: four retrievals waiting
    celery_workers.start("annotator", queues=[django_settings.ANNOTATOR_QUEUE], concurrency=1)
    for query in queries:
        wait_for(lambda q=query: settled(q), timeout=90, message=describe(query, celery_workers))

    def retrieved_at(query: Query) -> Any:  # the retrieval queues the candidates as its last step
        return min(Candidate.objects.filter(query=query).values_list("queued_at", flat=True))

    def written_at(query: Query) -> Any:
        return max(Candidate.objects.filter(query=query).values_list("finished_at", flat=True))

    by_retrieval = sorted(queries, key=retrieved_at)
    for earlier, later in zip(by_retrieval, by_retrieval[1:], strict=False):
        assert written_at(earlier) < retrieved_at(later), (
            f"question {earlier.pk}'s summaries were written after question {later.pk} was retrieved:\n"
            + celery_workers.logs()[-4000:]
        )
    assert all(Query.objects.get(pk=q.pk).status == Query.Status.READY for q in queries)
