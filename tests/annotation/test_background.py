"""Background work always ends, on the real database: the sweepers, the attempt cap, idempotent
scoring chunks, redelivered research jobs and the admin's alarm for a stopped scheduler."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from analysis.models import ResearchJob
from analysis.services import research_job_run, research_job_start, research_jobs_sweep
from annotation.models import Candidate, Query, SweeperRun
from annotation.services.generation import MAX_ATTEMPTS, candidate_generate, candidates_sweep
from annotation.services.query import background_sweep, queries_sweep, query_submit
from scoring.models import ScoringRun
from scoring.services import scoring_run_chunk, scoring_run_start, scoring_runs_sweep
from tests.annotation.factories import StudyFactory, join

pytestmark = pytest.mark.django_db

QUESTION = "How does night shift work affect nurses' sleep and patient safety?"


def generated(study, capture):
    with capture(execute=True):
        query = query_submit(participation=join(study), text=QUESTION, client_token="")
    query.refresh_from_db()
    return query


def test_a_candidate_whose_lease_expired_is_sent_again_once_per_window(django_capture_on_commit_callbacks):
    study = StudyFactory()
    with django_capture_on_commit_callbacks(execute=False):
        query = query_submit(participation=join(study), text=QUESTION, client_token="")
    from annotation.services.query import query_retrieve

    with django_capture_on_commit_callbacks(execute=False):
        query_retrieve(query_id=query.pk)
    now = timezone.now()
    # One candidate was running on a worker that died 20 s ago; the others wait in a fresh backlog.
    dead = query.candidates.first()
    Candidate.objects.filter(pk=dead.pk).update(
        status=Candidate.Status.RUNNING, attempts=1, lease_expires_at=now - timedelta(seconds=5)
    )
    with django_capture_on_commit_callbacks(execute=False) as sent:
        assert candidates_sweep(now=now) == {"candidates_requeued": 1}
    assert len(sent) == 1
    with django_capture_on_commit_callbacks(execute=False) as sent_again:
        assert candidates_sweep(now=now + timedelta(seconds=10)) == {"candidates_requeued": 0}
    assert sent_again == []  # no duplicate for the backlog, nor for the one just sent
    dead.refresh_from_db()
    assert dead.status == Candidate.Status.QUEUED


def test_a_candidate_that_keeps_losing_its_worker_ends_failed_with_a_reason(django_capture_on_commit_callbacks):
    query = generated(StudyFactory(), django_capture_on_commit_callbacks)
    candidate = query.candidates.first()
    Candidate.objects.filter(pk=candidate.pk).update(
        status=Candidate.Status.RUNNING, attempts=MAX_ATTEMPTS, lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert candidate_generate(candidate_id=candidate.pk) is None
    candidate.refresh_from_db()
    assert candidate.status == Candidate.Status.FAILED
    assert candidate.failure_reason.startswith(f"Gave up after {MAX_ATTEMPTS} attempts")
    assert candidate.failure_reason.lower().count("gave up") == 1, candidate.failure_reason  # issue 33


def test_a_retrieval_that_never_ends_is_failed_by_the_sweeper(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        query = query_submit(participation=join(StudyFactory()), text=QUESTION, client_token="")
    later = timezone.now() + timedelta(minutes=6)
    with django_capture_on_commit_callbacks(execute=False) as sent:
        assert queries_sweep(now=later)["queries_requeued"] == 1
    assert len(sent) == 1
    with django_capture_on_commit_callbacks(execute=False) as sent:
        assert queries_sweep(now=later + timedelta(minutes=3))["queries_requeued"] == 0
    assert sent == []
    assert queries_sweep(now=later + timedelta(minutes=5))["queries_failed"] == 1
    query.refresh_from_db()
    assert query.status == Query.Status.FAILED
    assert query.failure_reason == "Retrieval did not finish within 10 minutes."


def test_a_retrieval_whose_worker_died_is_sent_again_within_seconds(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        query = query_submit(participation=join(StudyFactory()), text=QUESTION, client_token="")
    now = timezone.now()
    # A worker took the search 20 s ago and renewed its lease until 5 s ago, then died.
    Query.objects.filter(pk=query.pk).update(lease_expires_at=now - timedelta(seconds=5))
    with django_capture_on_commit_callbacks(execute=True):
        assert queries_sweep(now=now)["queries_requeued"] == 1
    query.refresh_from_db()
    # The re-sent search ran (eager tasks here), its summaries were written and the first match is drawn.
    assert query.status == Query.Status.READY and query.bracket.matches.exists()


def test_a_retrieval_under_a_live_lease_or_waiting_out_its_backoff_is_left_alone(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        query = query_submit(participation=join(StudyFactory()), text=QUESTION, client_token="")
    now = timezone.now()
    Query.objects.filter(pk=query.pk).update(lease_expires_at=now + timedelta(seconds=30))
    with django_capture_on_commit_callbacks(execute=False) as sent:
        assert queries_sweep(now=now)["queries_requeued"] == 0
    assert sent == []
    # Once re-sent after its lease lapsed, the new message has a minute before another one is sent.
    with django_capture_on_commit_callbacks(execute=False) as sent:
        assert queries_sweep(now=now + timedelta(seconds=31))["queries_requeued"] == 1
        assert queries_sweep(now=now + timedelta(seconds=51))["queries_requeued"] == 0
    assert len(sent) == 1


def test_a_question_whose_send_failed_waits_for_the_broker_and_is_sent_when_it_is_back(
    django_capture_on_commit_callbacks,
):
    with django_capture_on_commit_callbacks(execute=False):
        query = query_submit(participation=join(StudyFactory()), text=QUESTION, client_token="")
    # The broker was down when it was asked, and stayed down past the retrieval deadline.
    Query.objects.filter(pk=query.pk).update(queue_failed_at=timezone.now())
    later = timezone.now() + timedelta(minutes=11)
    with django_capture_on_commit_callbacks(execute=True):
        result = queries_sweep(now=later)
    assert result["queries_failed"] == 0 and result["queries_requeued"] == 1
    query.refresh_from_db()
    assert query.status == Query.Status.READY and query.queue_failed_at is None


def test_a_scoring_chunk_delivered_twice_counts_once(django_capture_on_commit_callbacks):
    study = StudyFactory()
    generated(study, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=False):
        run = scoring_run_start(study=study, metrics=["rouge1"])
    run.refresh_from_db()
    chunk = run.chunks[0]
    assert scoring_run_chunk(run_id=run.pk, candidate_ids=chunk, chunk_index=0) == 4
    assert scoring_run_chunk(run_id=run.pk, candidate_ids=chunk, chunk_index=0) == 0
    assert scoring_run_chunk(run_id=run.pk, candidate_ids=chunk) == 0  # an old message without the index
    run.refresh_from_db()
    assert (run.status, run.done, run.total, run.percent) == (ScoringRun.Status.DONE, 4, 4, 100)


def test_a_scoring_run_that_stops_making_progress_is_restarted_then_failed(django_capture_on_commit_callbacks):
    study = StudyFactory()
    generated(study, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=False):
        run = scoring_run_start(study=study, metrics=["rouge1"])
    later = timezone.now() + timedelta(minutes=3)
    with django_capture_on_commit_callbacks(execute=False) as sent:
        assert scoring_runs_sweep(now=later)["scoring_runs_restarted"] == 1
    assert len(sent) == 1
    ScoringRun.objects.filter(pk=run.pk).update(restarts=10)
    assert scoring_runs_sweep(now=later + timedelta(minutes=3))["scoring_runs_failed"] == 1
    run.refresh_from_db()
    assert run.status == ScoringRun.Status.FAILED
    assert "0 of 4 candidates scored" in run.error


def test_a_busy_scoring_run_that_keeps_counting_chunks_is_never_failed_as_dead(django_capture_on_commit_callbacks):
    study = StudyFactory()
    generated(study, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=False):
        run = scoring_run_start(study=study, metrics=["rouge1", "rouge2"])
    run.refresh_from_db()
    # Ten windows passed without a chunk counted (a long backlog; one more would fail the run), then a
    # chunk is counted (a second chunk keeps the run unfinished).
    ScoringRun.objects.filter(pk=run.pk).update(restarts=10, chunks=[*run.chunks, run.chunks[0]])
    run.refresh_from_db()
    scoring_run_chunk(run_id=run.pk, candidate_ids=run.chunks[0], chunk_index=0)
    later = timezone.now() + timedelta(minutes=3)
    with django_capture_on_commit_callbacks(execute=False):
        assert scoring_runs_sweep(now=later) == {"scoring_runs_restarted": 1, "scoring_runs_failed": 0}
    run.refresh_from_db()
    assert run.status == ScoringRun.Status.RUNNING and run.restarts == 1


def test_a_redelivered_research_job_restarts_and_a_dead_one_is_swept(django_capture_on_commit_callbacks):
    study = StudyFactory()
    generated(study, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=False):
        job = research_job_start(study=study, kind=ResearchJob.Kind.EXPORT, options={"format": "csv"})
    # Its worker died mid-run: the row says running, with a lease nobody renews.
    ResearchJob.objects.filter(pk=job.pk).update(
        status=ResearchJob.Status.RUNNING, attempts=1, lease_expires_at=timezone.now() + timedelta(seconds=15)
    )
    assert research_job_run(job_id=job.pk).status == ResearchJob.Status.RUNNING  # a live lease is respected
    assert research_job_run(job_id=job.pk, redelivered=True).status == ResearchJob.Status.DONE
    ResearchJob.objects.filter(pk=job.pk).update(
        status=ResearchJob.Status.RUNNING, attempts=3, lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert research_jobs_sweep()["research_jobs_requeued"] == 1
    job.refresh_from_db()
    assert job.status == ResearchJob.Status.FAILED
    assert "stopped 3 times" in job.error


def test_the_admin_warns_when_the_sweeper_has_not_run(caplog, django_capture_on_commit_callbacks):
    admin = get_user_model().objects.create_superuser("boss", "b@example.org", "pw")
    client = Client()
    client.force_login(admin)
    page = client.get("/admin/").content.decode()
    assert 'id="sweeper-alert"' in page and "has never run" in page
    assert any(r.levelname == "ERROR" and "sweeper" in r.getMessage() for r in caplog.records)
    assert 'id="sweeper-alert"' in client.get("/admin/annotation/candidate/").content.decode()
    background_sweep()
    assert SweeperRun.objects.get(name="generation").last_run_at
    assert 'id="sweeper-alert"' not in client.get("/admin/").content.decode()
    SweeperRun.objects.update(last_run_at=timezone.now() - timedelta(minutes=5))
    assert "last ran" in client.get("/admin/").content.decode()
