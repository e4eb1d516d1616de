"""Judges on the model server that writes the annotators' summaries, with real workers (issue 30, the field test:
a G-Eval run judged 0 of 107 candidates in 8 minutes while 54 of the server's 64 slots were free). A judge
gives way while an annotator's summary waits for a slot of the same server and otherwise takes its share
(MODEL_SERVER_RESEARCH_SHARE) of the slots the summaries leave: with summaries being written and slots to spare,
a scoring run advances; with the server full of summaries and more waiting, it waits, and goes on once they are
written. The stand-in holds the summaries' answers until the test releases them and answers the judge at once.
The limit and the yielding marks are in Redis, so these run on Redis only."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings

from annotation.models import Candidate, Query
from scoring import services
from scoring.models import CandidateScore, ScoringRun
from tests.annotation.factories import StudyFactory
from tests.integration.test_worker import ask, describe, openai_study, settled
from tests.integration.worker import WorkerPool, broker_url, wait_for
from tests.support.openai_standin import OpenAIStandIn, openai_standin

pytestmark = [pytest.mark.worker, pytest.mark.timeout(240)]

JUDGE = "judge-model"


def _start(pool: WorkerPool, tmp_path: Path, *, annotator_concurrency: int) -> None:
    env = {
        "MODEL_SERVER_LIMIT_URL": broker_url(),  # one limit across both workers, as deployed
        "MODEL_SERVER_RESEARCH_SHARE": "0.5",
        # Both workers on one host, research yielding to annotator work there with a long budget: a judge that
        # paused for the summaries in flight would wait a minute.
        "RESEARCH_YIELD_URL": broker_url(),
        "RESEARCH_YIELD_HOST": f"test-{uuid.uuid4().hex[:8]}",
        "RESEARCH_YIELD_MAX_PAUSE_S": "60",
        "JUDGE_CACHE_DIR": str(tmp_path / "judge-cache"),
    }
    pool.start(
        "annotator",
        queues=[django_settings.ANNOTATOR_QUEUE, django_settings.RETRIEVAL_QUEUE],
        concurrency=annotator_concurrency,
        extra_env=env,
    )
    pool.start(
        "research",
        queues=[django_settings.RESEARCH_QUEUE, django_settings.CELERY_TASK_DEFAULT_QUEUE],
        concurrency=1,
        extra_env=env,
    )


def _scored_study(pool: WorkerPool) -> Any:
    """A study whose four candidates (the offline backends) are there to be judged."""
    study = StudyFactory(slug=f"judged-{uuid.uuid4().hex[:6]}")
    done = ask(study)
    wait_for(lambda: settled(done), timeout=60, message=describe(done, pool))
    return study


def _held_standin(release: threading.Event) -> Any:
    def respond(body: dict[str, Any]) -> str:
        if body.get("model") == JUDGE:
            return "4"  # a 1-5 rating (scoring.core.judges.parse_rating)
        release.wait(120)
        return "The sources agree on the main finding [1]."

    return openai_standin(respond, hang_s=120)


def _judge_calls(standin: OpenAIStandIn) -> int:
    with standin.lock:
        return sum(1 for body in standin.requests if body.get("model") == JUDGE)


def _run(run: ScoringRun) -> ScoringRun:
    run.refresh_from_db()
    return run


def _judged(run: ScoringRun) -> list[float | None]:
    return list(
        CandidateScore.objects.filter(candidate__query__participation__study=run.study, metric="geval_relevance")
        .order_by("candidate_id")
        .values_list("value", flat=True)
    )


def test_a_scoring_run_advances_beside_summaries_when_the_server_has_room(
    redis_workers: WorkerPool, tmp_path: Path
) -> None:
    _start(redis_workers, tmp_path, annotator_concurrency=4)
    scored = _scored_study(redis_workers)
    release = threading.Event()
    with _held_standin(release) as standin:
        try:
            # The server has 8 slots (the systems' concurrency); four summaries hold four of them.
            query = ask(openai_study(standin, slug="room", timeout=120, concurrency=8))
            wait_for(lambda: standin.in_flight == 4, timeout=60, message=describe(query, redis_workers))

            run = services.scoring_run_start(
                study=scored, metrics=["geval_relevance"], judge={"model": JUDGE, "base_url": standin.base_url}
            )
            # Four judge calls answered at once: seconds, where a pause for the summaries' marks lasts until
            # they lapse (kernel.yielding.MARK_TTL_S, 60 s) and a judge without a slot waits out its time-out.
            wait_for(
                lambda: _run(run).status != ScoringRun.Status.RUNNING,
                timeout=30,
                message=lambda: (
                    f"run {_run(run).done}/{run.total}, judge calls {_judge_calls(standin)}\n"
                    + redis_workers.logs()[-4000:]
                ),
            )
            # Judged while the four summaries were still being written.
            assert (run.status, run.done) == (ScoringRun.Status.DONE, 4)
            assert _judged(run) == [4.0] * 4
            assert standin.in_flight == 4
            assert Candidate.objects.filter(query=query, status=Candidate.Status.RUNNING).count() == 4
        finally:
            release.set()
        wait_for(lambda: settled(query), timeout=60, message=describe(query, redis_workers))
    assert Query.objects.get(pk=query.pk).status == Query.Status.READY


def test_a_scoring_run_waits_while_summaries_wait_for_the_server(redis_workers: WorkerPool, tmp_path: Path) -> None:
    _start(redis_workers, tmp_path, annotator_concurrency=8)
    scored = _scored_study(redis_workers)
    release = threading.Event()
    with _held_standin(release) as standin:
        try:
            # The server has 4 slots; eight summaries: four hold them, four wait for one.
            study = openai_study(standin, slug="full", timeout=120, concurrency=4)
            queries = [ask(study), ask(study)]  # two annotators
            wait_for(
                lambda: (
                    standin.in_flight == 4
                    and Candidate.objects.filter(query__in=queries, status=Candidate.Status.RUNNING).count() == 8
                ),
                timeout=60,
                message=describe(queries[0], redis_workers),
            )
            run = services.scoring_run_start(
                study=scored, metrics=["geval_relevance"], judge={"model": JUDGE, "base_url": standin.base_url}
            )
            time.sleep(8.0)  # the run's chunk has started and asked for a slot (its log says when)
            assert "score_chunk" in redis_workers.logs()
            assert (_run(run).done, _judge_calls(standin)) == (0, 0)
            assert standin.in_flight == 4
        finally:
            release.set()
        # The summaries are written; then the judge takes the server.
        wait_for(
            lambda: _run(run).status != ScoringRun.Status.RUNNING,
            timeout=90,
            message=lambda: f"run {_run(run).done}/{run.total}\n" + redis_workers.logs()[-4000:],
        )
        for query in queries:
            wait_for(lambda q=query: settled(q), timeout=60, message=describe(query, redis_workers))
    assert (run.status, run.done) == (ScoringRun.Status.DONE, 4)
    assert _judged(run) == [4.0] * 4
    assert [Query.objects.get(pk=q.pk).status for q in queries] == [Query.Status.READY] * 2
