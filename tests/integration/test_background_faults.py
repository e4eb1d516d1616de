"""Background work always ends, for real: a Celery worker (and its beat) on Redis and PostgreSQL,
faults caused on purpose, and what the annotator or researcher would see asserted."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from annotation.models import Bracket, Candidate, Query
from annotation.services.query import query_submit
from scoring.models import ScoringRun
from scoring.services import scoring_run_start
from studies.models import PromptTemplate, Study
from tests.annotation.factories import StudyFactory, join
from tests.integration.test_worker import QUESTION, candidates, describe, openai_study, settled
from tests.integration.worker import CeleryWorker, WorkerPool, flush_broker, wait_for
from tests.support.openai_standin import openai_standin

pytestmark = [pytest.mark.worker, pytest.mark.timeout(150)]


def start_with_beat(pool: WorkerPool, name: str, tmp_path: Path) -> CeleryWorker:
    """A worker that also runs the deployment's beat schedule (config/settings/base.py)."""
    worker = CeleryWorker(database_url=pool.database_url, broker=pool.broker, log_dir=pool.log_dir, name=name)
    worker.args += ["--beat", f"--schedule={tmp_path / f'beat-{worker.name}'}"]
    pool.workers.append(worker)
    return worker.start()


def ask(study: Study) -> Query:
    return query_submit(participation=join(study), text=QUESTION, client_token="")


def test_a_worker_killed_outright_mid_generation_is_recovered_within_a_minute(
    celery_workers: WorkerPool, tmp_path: Path
) -> None:
    doomed = celery_workers.start("doomed")
    with openai_standin(delay=3.0) as standin:
        query = ask(openai_study(standin, slug="killed-outright", timeout=10))
        wait_for(
            lambda: Candidate.objects.filter(query=query, status=Candidate.Status.RUNNING).count() == 2,
            timeout=20,
            message=describe(query, celery_workers),
        )
        # SIGKILL the whole worker, main process included: nobody gives the messages back to the broker.
        doomed.stop(grace=0)
        killed_at = time.monotonic()
        start_with_beat(celery_workers, "rescuer", tmp_path)
        wait_for(lambda: settled(query), timeout=55, interval=0.5, message=describe(query, celery_workers))
        recovered_s = time.monotonic() - killed_at
        rows = candidates(query)
        assert [c.status for c in rows] == ["done"] * 4, describe(query, celery_workers)()
        assert all(c.text.startswith("Stand-in summary") for c in rows)
        assert Bracket.objects.filter(query=query).count() == 1
        query.refresh_from_db()
        assert query.status == Query.Status.READY
        # A figure for the log, not an assertion: wait_for's timeout only bounds a hung test.
        print(f"SIGKILL to all candidates done: {recovered_s:.1f} s")


def test_unexpected_errors_in_retrieval_and_generation_end_failed_with_a_reason(celery_workers: WorkerPool) -> None:
    celery_workers.start("errors")
    listed = StudyFactory(slug="listed")
    Study.objects.filter(pk=listed.pk).update(retrieval_settings=[{"filters": {"from_year": 2020}}])
    odd = StudyFactory(slug="odd-filters")
    Study.objects.filter(pk=odd.pk).update(retrieval_settings={"filters": 5})
    braces = StudyFactory(slug="braces")
    template = PromptTemplate.objects.create(name="braces", body='Answer {query} as JSON: {"a": 1}', persona_block="")
    Study.objects.filter(pk=braces.pk).update(prompt_template=template)

    listed_query, odd_query, braces_query = ask(listed), ask(odd), ask(braces)

    def ended(query: Query) -> bool:
        query.refresh_from_db()
        if query.status == Query.Status.FAILED:
            return True
        rows = candidates(query)
        return bool(rows) and all(c.status == Candidate.Status.FAILED for c in rows)

    for query in (listed_query, odd_query, braces_query):
        wait_for(lambda q=query: ended(q), timeout=30, message=describe(query, celery_workers))
    assert listed_query.status == Query.Status.FAILED
    assert "retrieval settings must be a JSON object" in listed_query.failure_reason
    assert odd_query.status == Query.Status.FAILED
    assert odd_query.failure_reason.startswith("Unexpected error (TypeError")
    rows = candidates(braces_query)
    assert all("prompt template" in c.failure_reason and "{{" in c.failure_reason for c in rows)
    assert all(c.attempts == 1 for c in rows)


def test_a_model_server_that_hangs_past_the_soft_time_limit_is_retried(
    celery_workers: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A 3 s soft limit; the stand-in holds the first two calls for 5 s and the client would wait 10 s.
    monkeypatch.setenv("GENERATION_SOFT_TIME_LIMIT_S", "3")
    celery_workers.start("hang")
    with openai_standin(script=["timeout", "timeout"], hang_s=5.0) as standin:
        query = ask(openai_study(standin, slug="hang", timeout=10))
        wait_for(lambda: settled(query), timeout=60, interval=0.5, message=describe(query, celery_workers))
        rows = candidates(query)
        assert [c.status for c in rows] == ["done"] * 4, describe(query, celery_workers)()
        assert sorted(c.attempts for c in rows) == [1, 1, 2, 2]
        assert "time limit" in celery_workers.logs() or "SoftTimeLimitExceeded" in celery_workers.logs()


def test_a_model_server_whose_reply_never_ends_fails_the_summaries_and_the_worker_goes_on(
    celery_workers: WorkerPool,
) -> None:
    # The deployment's cap, from the worker's environment: 64 KiB. The stand-in answers each of the question's
    # four calls with a body that never ends; read whole, it would fill the worker's memory.
    worker = celery_workers.start("capped", extra_env={"MODEL_SERVER_MAX_RESPONSE_BYTES": "65536"})
    with openai_standin(script=["flood"] * 4) as standin:
        query = ask(openai_study(standin, slug="flooded"))
        wait_for(lambda: settled(query), timeout=30, interval=0.5, message=describe(query, celery_workers))
        rows = candidates(query)
        assert [c.status for c in rows] == ["failed"] * 4, describe(query, celery_workers)()
        for row in rows:
            assert f"{row.model_name}: the reply from {standin.base_url} was larger than 64 KiB" in row.failure_reason
            assert "raise MODEL_SERVER_MAX_RESPONSE_BYTES" in row.failure_reason
            assert row.attempts == 1  # permanent: no attempt spent on asking again
        assert standin.completions == 4 and standin.script.hung_up.is_set()
        # The same worker process goes on to write the next question's summaries.
        after = ask(openai_study(standin, slug="after-the-flood"))
        wait_for(lambda: settled(after), timeout=30, interval=0.5, message=describe(after, celery_workers))
        assert [c.status for c in candidates(after)] == ["done"] * 4, describe(after, celery_workers)()
    assert worker.process is not None and worker.process.poll() is None


def test_a_scoring_run_whose_messages_were_lost_is_restarted_by_the_sweeper(
    celery_workers: WorkerPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Generate a study's summaries, start a run, lose its chunk messages (a worker killed outright and
    # its broker state gone); a worker with beat then finishes the run through the sweeper.
    celery_workers.start("generator")
    study = StudyFactory(slug="scored")
    query = ask(study)
    wait_for(lambda: settled(query), timeout=30, message=describe(query, celery_workers))
    celery_workers.stop_all()
    flush_broker(celery_workers.broker)
    run = scoring_run_start(study=study, metrics=["rouge1"])
    flush_broker(celery_workers.broker)
    ScoringRun.objects.filter(pk=run.pk).update(lease_expires_at=run.created_at)  # as the lease would after 2 min
    start_with_beat(celery_workers, "sweeper", tmp_path)
    wait_for(
        lambda: ScoringRun.objects.get(pk=run.pk).status == ScoringRun.Status.DONE,
        timeout=40,
        message=celery_workers.logs,
    )
    run.refresh_from_db()
    # What the researcher sees: every candidate scored once. (`restarts` counts restarts in a row without
    # progress, so the counted chunk set it back to 0.)
    assert (run.done, run.total, run.percent, run.restarts) == (4, 4, 100, 0)


@pytest.mark.timeout(360)
def test_a_research_job_whose_worker_was_killed_is_restarted_by_the_sweeper(
    celery_workers: WorkerPool, tmp_path: Path
) -> None:
    from analysis.models import ResearchJob
    from analysis.services import research_job_start
    from annotation.selectors.tournament import match_current
    from annotation.services.tournament import judgment_record
    from tests.analysis.conftest import QUESTIONS

    doomed = celery_workers.start("doomed")
    study = StudyFactory(slug="reported")
    for n in range(3):
        participation = join(study)
        for text in QUESTIONS[:2]:
            query = query_submit(participation=participation, text=text, client_token="")
            wait_for(lambda q=query: settled(q), timeout=30, message=describe(query, celery_workers))
            while (match := match_current(query=query)) is not None:
                judgment_record(match=match, choice="left" if n % 2 else "right", by=participation)
    job = research_job_start(study=study, kind=ResearchJob.Kind.REPORT, options={"n_resamples": 100_000})
    wait_for(
        lambda: ResearchJob.objects.get(pk=job.pk).status == ResearchJob.Status.RUNNING,
        timeout=20,
        interval=0.05,
        message=celery_workers.logs,
    )
    doomed.stop(grace=0)  # SIGKILL, main process included
    job.refresh_from_db()
    assert job.status == ResearchJob.Status.RUNNING  # what the researcher would see forever, before
    start_with_beat(celery_workers, "rescuer", tmp_path)
    # The restarted report computes its 100,000 resamples again: on two loaded cores that can take minutes.
    wait_for(
        lambda: ResearchJob.objects.get(pk=job.pk).status in (ResearchJob.Status.DONE, ResearchJob.Status.FAILED),
        timeout=300,
        message=celery_workers.logs,
    )
    job.refresh_from_db()
    assert (job.status, job.attempts, job.progress) == (ResearchJob.Status.DONE, 2, 100), job.error
    assert "report.json" in job.files
