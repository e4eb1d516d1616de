"""The broker unreachable when a question is asked: the annotator gets no 500. The question is committed
(as `retrieving`, for the stuck-query sweeper to send again) and both the page and the API say plainly
that the search has not started yet. The Celery app really sends to a closed port."""

from __future__ import annotations

import re
import socket

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Query
from studies.services.invitation import invitation_create_bulk
from tests.annotation.factories import PERSONA, StudyFactory
from tests.integration.worker import celery_app_sending_to

pytestmark = [pytest.mark.worker, pytest.mark.timeout(60)]

NOT_STARTED = "our background service cannot be reached right now, so the search has not started"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens here once the socket is closed


def test_a_question_asked_while_the_broker_is_down_is_saved_and_explained(transactional_db: None) -> None:
    page_invitation = invitation_create_bulk(study=StudyFactory(slug="sleep"), count=1)[0]
    invitation = invitation_create_bulk(study=StudyFactory(slug="sleep-api"), count=1)[0]
    client = Client()
    assert client.post(reverse("annotation:join", args=[page_invitation.token]), {"consent": "on"}).status_code == 302
    assert client.post(reverse("annotation:profile", args=["sleep"]), PERSONA).status_code == 302
    ask = reverse("annotation:ask", args=["sleep"])
    token = re.search(r'name="client_token" value="([0-9a-f]+)"', client.get(ask).content.decode()).group(1)

    api = APIClient()
    me = api.post(f"/api/v1/invitations/{invitation.token}/accept/", {"consent": True}, format="json").json()
    api.credentials(HTTP_AUTHORIZATION=f"Token {me['token']}")
    api.put(f"/api/v1/participations/{me['id']}/persona/", PERSONA, format="json")

    with celery_app_sending_to(f"redis://127.0.0.1:{closed_port()}/0"):
        response = client.post(ask, {"text": "How does night shift work affect sleep?", "client_token": token})
        created = api.post(f"/api/v1/participations/{me['id']}/queries/", {"text": "Shift work"}, format="json")

    assert response.status_code == 302 and response["Location"] == reverse("annotation:wait", args=["sleep", 1])
    query = Query.objects.get(client_token=token)
    assert query.status == Query.Status.RETRIEVING and query.queue_failed_at is not None
    wait = client.get(response["Location"]).content.decode()
    assert "Your question is saved, but " + NOT_STARTED in wait

    assert created.status_code == 201, created.content
    assert NOT_STARTED in created.json()["message"]
    assert Query.objects.get(pk=created.json()["id"]).status == Query.Status.RETRIEVING
    # The API's poll (its own body and its own narrow read of the question) says the same, not "searching".
    status_url = f"/api/v1/queries/{created.json()['id']}/"
    polled = api.get(status_url)
    assert polled.status_code == 200 and NOT_STARTED in polled.json()["message"], polled.content
    assert (polled.json()["status"], polled.json()["overdue"]) == (Query.Status.RETRIEVING, False)

    # The broker is back (this process runs tasks eagerly again): "Try again" sends the search, and the
    # page stops saying the service cannot be reached.
    assert client.post(reverse("annotation:retry", args=["sleep", 1]))["Location"].endswith("/wait/")
    query.refresh_from_db()
    assert query.queue_failed_at is None and query.status == Query.Status.READY
    # And through the API: its "try again" sends the search, and the poll reads ready with its summaries.
    assert api.post(f"{status_url}retry/").status_code == 200
    polled = api.get(status_url).json()
    assert polled["status"] == Query.Status.READY and NOT_STARTED not in polled["message"]
    assert [c["status"] for c in polled["candidates"]] == ["done"] * 4


def test_research_work_started_while_the_broker_is_down_is_kept_and_sent_when_it_is_back(
    transactional_db: None,
) -> None:
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.utils import timezone

    from analysis.models import ResearchJob
    from analysis.services import research_jobs_sweep
    from annotation.services.query import query_submit
    from scoring.models import ScoringRun
    from scoring.services import scoring_runs_sweep
    from studies.models import StudyMembership
    from tests.annotation.factories import join

    study = StudyFactory(slug="scored-offline")
    query_submit(participation=join(study), text="How does night shift work affect sleep?", client_token="")
    researcher = APIClient()
    user = get_user_model().objects.create_user("r")  # a researcher of the study (docs/permissions.md)
    user.groups.add(Group.objects.create(name="researchers"))
    StudyMembership.objects.create(study=study, user=user, role="researcher")
    researcher.force_authenticate(user)

    with celery_app_sending_to(f"redis://127.0.0.1:{closed_port()}/0"):
        job = researcher.post(
            "/api/v1/research/studies/scored-offline/jobs/",
            {"kind": "export", "options": {"format": "csv"}},
            format="json",
        )
        run = researcher.post(
            "/api/v1/research/studies/scored-offline/scoring-runs/", {"metrics": ["rouge1"]}, format="json"
        )
    # No 500: both are saved and say they are waiting.
    assert job.status_code == 201, job.content
    assert run.status_code == 201, run.content
    assert ResearchJob.objects.get(pk=job.json()["id"]).status == ResearchJob.Status.QUEUED
    assert ScoringRun.objects.get(pk=run.json()["id"]).status == ScoringRun.Status.RUNNING

    # The broker is back (tasks run eagerly in this process again): the sweepers send what never arrived.
    later = timezone.now() + timedelta(minutes=11)
    assert research_jobs_sweep(now=later)["research_jobs_requeued"] == 1
    assert scoring_runs_sweep(now=later)["scoring_runs_restarted"] == 1
    assert ResearchJob.objects.get(pk=job.json()["id"]).status == ResearchJob.Status.DONE
    scored = ScoringRun.objects.get(pk=run.json()["id"])
    assert (scored.status, scored.done, scored.total) == (ScoringRun.Status.DONE, 4, 4)
