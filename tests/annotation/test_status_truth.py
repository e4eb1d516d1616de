"""A failed question looks failed to API clients the moment the waiting page says so: the API's question
(`/api/v1/queries/<id>/`) and the page's poll read its state through one selector (query_wait_state), so
status, failure and reason are the same in both, and neither names a model (annotators are blind to them)."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from rest_framework.test import APIClient

from annotation.models import Candidate, Participation, Query
from annotation.services.generation import candidate_mark_failed
from annotation.services.query import query_retrieve
from studies.services.invitation import invitation_create_bulk
from tests.annotation.factories import PERSONA, StudyFactory

pytestmark = pytest.mark.django_db

QUESTION = "How does night shift work affect nurses' sleep?"
MODEL_FAULT = "model-one: connection to http://llm.internal/v1 failed (ConnectionError: Error 111)"


def _annotator() -> tuple[APIClient, Client, dict]:
    study = StudyFactory(slug="sleep")
    invitation = invitation_create_bulk(study=study, count=1)[0]
    me = APIClient().post(f"/api/v1/invitations/{invitation.token}/accept/", {"consent": True}, format="json").json()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {me['token']}")
    assert api.put(f"/api/v1/participations/{me['id']}/persona/", PERSONA, format="json").status_code == 200
    page = Client()
    page.force_login(Participation.objects.get(pk=me["id"]).annotator)
    return api, page, me


def _seen(api: APIClient, page: Client, query: Query) -> tuple[dict, dict, str]:
    body = api.get(f"/api/v1/queries/{query.pk}/").json()
    poll = page.get(f"/study/sleep/q/{query.index}/status/").json()
    html = page.get(f"/study/sleep/q/{query.index}/wait/").content.decode()
    return body, poll, html


def _failure_shown(html: str) -> bool:
    return bool(re.search(r'id="failure"(?![^>]*\bhidden\b)', html))


def test_a_question_whose_summaries_all_failed_reports_the_failure_and_its_reason_in_the_api(
    django_capture_on_commit_callbacks,
) -> None:
    api, page, me = _annotator()
    with django_capture_on_commit_callbacks():  # no worker: the test plays the tasks' parts itself
        created = api.post(f"/api/v1/participations/{me['id']}/queries/", {"text": QUESTION}, format="json")
        query = query_retrieve(query_id=created.json()["id"])
    candidates = list(Candidate.objects.filter(query=query))
    assert len(candidates) == 4
    body, poll, html = _seen(api, page, query)
    assert (body["status"], body["failed"], body["failure_reason"]) == ("generating", False, "")
    assert not _failure_shown(html)

    # Each summary's task gives up (what its on_failure calls).
    for candidate in candidates:
        candidate_mark_failed(candidate_id=candidate.pk, reason=MODEL_FAULT)
    body, poll, html = _seen(api, page, query)
    assert _failure_shown(html)
    assert body["status"] == "failed" and body["failed"] is True and body["overdue"] is False
    assert body["failure_reason"] == "4 of the summaries could not be written."
    assert body["message"] == "Something went wrong: 4 of the summaries could not be written."
    assert [c["status"] for c in body["candidates"]] == ["failed"] * 4
    # The page's poll says the same, word for word; neither names the model or its server.
    assert {k: poll[k] for k in ("status", "failed", "failure_reason", "message", "overdue")} == {
        k: body[k] for k in ("status", "failed", "failure_reason", "message", "overdue")
    }
    assert "model-one" not in str(body) and "llm.internal" not in str(body)
    # The question's row is unchanged: retry and set aside still work on it as before.
    assert Query.objects.get(pk=query.pk).status == Query.Status.GENERATING

    # Try again: the failed summaries are queued again, and the question is no longer failed anywhere.
    with django_capture_on_commit_callbacks() as sent:
        retried = api.post(f"/api/v1/queries/{query.pk}/retry/")
    assert retried.status_code == 200
    assert (retried.json()["status"], retried.json()["failed"]) == ("generating", False)
    assert len(sent) == 4
    body, poll, html = _seen(api, page, query)
    assert (body["status"], poll["status"], body["failed"], poll["failed"]) == (
        "generating",
        "generating",
        False,
        False,
    )
    assert not _failure_shown(html)
    # The worker runs them this time (the offline summariser): ready, in the API and on the poll.
    for send in sent:
        send()
    body, poll, _ = _seen(api, page, query)
    assert (body["status"], poll["status"]) == ("ready", "ready")
    assert body["failure_reason"] == ""


def test_a_failed_search_reports_its_failure_in_the_api_as_on_the_page(django_capture_on_commit_callbacks) -> None:
    api, page, me = _annotator()
    with django_capture_on_commit_callbacks():
        created = api.post(f"/api/v1/participations/{me['id']}/queries/", {"text": QUESTION}, format="json")
    query = Query.objects.get(pk=created.json()["id"])
    Query.objects.filter(pk=query.pk).update(status=Query.Status.FAILED, failure_reason="No sources were found.")
    body, poll, html = _seen(api, page, query)
    assert _failure_shown(html)
    assert (body["status"], body["failed"], body["failure_reason"]) == (
        "failed",
        True,
        "The search for sources did not succeed.",
    )
    assert (poll["status"], poll["failed"], poll["failure_reason"]) == (
        body["status"],
        body["failed"],
        body["failure_reason"],
    )
