"""Work whose message was lost is found from its own state and sent again: the windows are settings, a send
the broker refused is sent at the next sweep, and a search is never run twice at once (its lease). Real
database; the broker's restart itself is caused in tests/faults (test_a_broker_restart_...)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from analysis.models import ResearchJob
from analysis.services import research_jobs_sweep
from annotation.models import Candidate, Query, RetrievedDocument
from annotation.services.generation import candidate_mark_unsent, candidates_sweep
from annotation.services.query import queries_sweep, query_claim, query_retrieve, query_submit
from tests.annotation.factories import StudyFactory, join

pytestmark = pytest.mark.django_db

QUESTION = "How does night shift work affect nurses' sleep and patient safety?"


def _candidates(capture) -> list[Candidate]:
    with capture(execute=False):
        query = query_submit(participation=join(StudyFactory()), text=QUESTION, client_token="")
        query_retrieve(query_id=query.pk)
    return list(Candidate.objects.filter(query=query).order_by("pk"))


def test_the_queued_window_is_a_setting(settings, django_capture_on_commit_callbacks) -> None:
    candidates = _candidates(django_capture_on_commit_callbacks)
    now = timezone.now()
    Candidate.objects.filter(pk=candidates[0].pk).update(queued_at=now - timedelta(seconds=40))
    settings.SWEEP_REQUEUE_QUEUED_AFTER_S = 60.0
    with django_capture_on_commit_callbacks(execute=False) as sent:
        assert candidates_sweep(now=now)["candidates_requeued"] == 0
    settings.SWEEP_REQUEUE_QUEUED_AFTER_S = 30.0
    with django_capture_on_commit_callbacks(execute=False) as sent:
        assert candidates_sweep(now=now)["candidates_requeued"] == 1
        # Stamped: the next sweeps leave it to the message just sent.
        assert candidates_sweep(now=now + timedelta(seconds=10))["candidates_requeued"] == 0
    assert len(sent) == 1
    assert Candidate.objects.get(pk=candidates[0].pk).queued_at == now


def test_a_candidate_whose_send_was_refused_is_sent_at_the_next_sweep(django_capture_on_commit_callbacks) -> None:
    candidates = _candidates(django_capture_on_commit_callbacks)
    candidate_mark_unsent(candidate_id=candidates[1].pk)  # what a refused send or retry records
    with django_capture_on_commit_callbacks(execute=False) as sent:
        assert candidates_sweep()["candidates_requeued"] == 1
    assert len(sent) == 1
    assert Candidate.objects.get(pk=candidates[1].pk).queued_at is not None
    # A running candidate is never marked: its worker holds it.
    Candidate.objects.filter(pk=candidates[2].pk).update(status=Candidate.Status.RUNNING)
    candidate_mark_unsent(candidate_id=candidates[2].pk)
    assert Candidate.objects.get(pk=candidates[2].pk).queued_at is not None


def test_a_research_job_whose_send_was_refused_or_waited_past_the_window_is_sent_again(
    settings, django_capture_on_commit_callbacks
) -> None:
    study = StudyFactory()
    now = timezone.now()
    unsent = ResearchJob.objects.create(study=study, kind="export", options={"format": "csv"}, queued_at=None)
    waited = ResearchJob.objects.create(
        study=study, kind="export", options={"format": "csv"}, queued_at=now - timedelta(seconds=20)
    )
    fresh = ResearchJob.objects.create(study=study, kind="export", options={"format": "csv"}, queued_at=now)
    settings.SWEEP_REQUEUE_QUEUED_AFTER_S = 15.0
    with django_capture_on_commit_callbacks(execute=False) as sent:
        assert research_jobs_sweep(now=now)["research_jobs_requeued"] == 2
    assert len(sent) == 2
    assert {j.pk for j in ResearchJob.objects.filter(queued_at=now)} == {unsent.pk, waited.pk, fresh.pk}


def test_a_search_is_never_run_twice_at_once(django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        query = query_submit(participation=join(StudyFactory()), text=QUESTION, client_token="")
    assert query_claim(query_id=query.pk)  # a worker is searching
    # A second message (a sweep's re-send, the annotator's "try again") leaves it alone.
    assert not query_claim(query_id=query.pk)
    with django_capture_on_commit_callbacks(execute=False) as sent:
        query_retrieve(query_id=query.pk)
    assert sent == [] and not RetrievedDocument.objects.filter(query=query).exists()
    assert Query.objects.get(pk=query.pk).status == Query.Status.RETRIEVING
    # The broker redelivers only when the holder died: that message may take over at once.
    assert query_claim(query_id=query.pk, redelivered=True)
    # Once the lease lapses (the worker died), the next message searches.
    Query.objects.filter(pk=query.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=False) as sent:
        query_retrieve(query_id=query.pk)
    assert len(sent) == 4 and Query.objects.get(pk=query.pk).status == Query.Status.GENERATING


def test_the_retrieval_windows_are_settings(settings, django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        query = query_submit(participation=join(StudyFactory()), text=QUESTION, client_token="")
    now = timezone.now()
    Query.objects.filter(pk=query.pk).update(created_at=now - timedelta(seconds=45))
    settings.SWEEP_RETRIEVAL_REQUEUE_AFTER_S = 30.0
    settings.SWEEP_RETRIEVAL_DEADLINE_S = 40.0
    assert queries_sweep(now=now)["queries_failed"] == 1
    query.refresh_from_db()
    assert query.status == Query.Status.FAILED
    assert query.failure_reason == "Retrieval did not finish within 40 seconds."
