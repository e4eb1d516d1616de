"""The JSON API: the annotator flow end to end, field errors, ownership, and admin operations."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.models import Judgment, Match, Participation
from studies.models import Study
from studies.services.invitation import invitation_create_bulk
from tests.annotation.factories import PERSONA, StudyFactory, study_with_a_failing_system
from tests.support.openai_standin import openai_standin

pytestmark = pytest.mark.django_db


@pytest.fixture
def study():
    return StudyFactory(slug="api")


def _annotator(study) -> tuple[APIClient, dict]:
    invitation = invitation_create_bulk(study=study, count=1)[0]
    client = APIClient()
    response = client.post(f"/api/v1/invitations/{invitation.token}/accept/", {"consent": True}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    token_client = APIClient()
    token_client.credentials(HTTP_AUTHORIZATION=f"Token {body['token']}")
    return token_client, body


def test_full_flow_over_the_api(study, django_capture_on_commit_callbacks):
    client, me = _annotator(study)
    pid = me["id"]
    assert client.put(f"/api/v1/participations/{pid}/persona/", PERSONA, format="json").status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        created = client.post(f"/api/v1/participations/{pid}/queries/", {"text": "sleep and shift work"}, format="json")
    assert created.status_code == 201
    qid = created.json()["id"]
    query = client.get(f"/api/v1/queries/{qid}/").json()
    assert query["status"] == "ready" and len(query["documents"]) == 10
    assert [c["status"] for c in query["candidates"]] == ["done"] * 4
    answered = 0
    while (match := client.get(f"/api/v1/queries/{qid}/current-match/")).status_code == 200:
        body = match.json()
        assert set(body["left"]) == set(body["right"]) == {"text"}
        assert not {"system", "model", "condition", "position"} & set(body)
        assert (
            client.post(f"/api/v1/matches/{body['id']}/choice/", {"choice": "left"}, format="json").status_code == 200
        )
        answered += 1
    assert answered == 3
    finished = client.post(f"/api/v1/participations/{pid}/finish/").json()
    assert finished["completion_code"]


def test_the_current_match_is_refused_while_the_study_is_paused_and_once_the_participation_ended(
    study, django_capture_on_commit_callbacks
):
    # The API's current-match read fetches only the participation's and the study's columns that showing a
    # match checks: the refusals must still see the live status and the end of the participation.
    client, me = _annotator(study)
    pid = me["id"]
    client.put(f"/api/v1/participations/{pid}/persona/", PERSONA, format="json")
    with django_capture_on_commit_callbacks(execute=True):
        qid = client.post(f"/api/v1/participations/{pid}/queries/", {"text": "sleep"}, format="json").json()["id"]
    url = f"/api/v1/queries/{qid}/current-match/"
    Study.objects.filter(pk=study.pk).update(status=Study.Status.PAUSED)
    paused = client.get(url)
    assert paused.status_code == 403 and "paused" in paused.json()["message"]
    assert not Match.objects.exclude(shown_at=None).exists()  # nothing recorded as shown
    Study.objects.filter(pk=study.pk).update(status=Study.Status.OPEN)
    shown = client.get(url)
    assert shown.status_code == 200 and shown.json()["left"]["text"] and shown.json()["shown_at"]
    Participation.objects.filter(pk=pid).update(stopped_at=timezone.now())
    ended = client.get(url)
    assert ended.status_code == 409 and "already finished" in ended.json()["message"]


def test_a_new_question_under_a_spent_client_token_is_a_new_question(study, django_capture_on_commit_callbacks):
    client, me = _annotator(study)
    pid = me["id"]
    client.put(f"/api/v1/participations/{pid}/persona/", PERSONA, format="json")
    queries = f"/api/v1/participations/{pid}/queries/"
    with django_capture_on_commit_callbacks(execute=True):
        first = client.post(queries, {"text": "sleep and shift work", "client_token": "t1"}, format="json").json()
    # Asked again with the same text: the same question; with another text while the first is open: refused.
    resent = client.post(queries, {"text": "sleep and shift work", "client_token": "t1"}, format="json")
    assert resent.json()["id"] == first["id"]
    refused = client.post(queries, {"text": "fatigue and shift length", "client_token": "t1"}, format="json")
    assert refused.status_code == 409 and "finish ranking your current question" in refused.json()["message"]
    while (match := client.get(f"/api/v1/queries/{first['id']}/current-match/")).status_code == 200:
        client.post(f"/api/v1/matches/{match.json()['id']}/choice/", {"choice": "left"}, format="json")
    with django_capture_on_commit_callbacks(execute=True):
        second = client.post(queries, {"text": "fatigue and shift length", "client_token": "t1"}, format="json")
    assert second.status_code == 201 and second.json()["id"] != first["id"]
    assert second.json()["text"] == "fatigue and shift length" and second.json()["index"] == 2


def test_malformed_payloads_get_field_messages(study, django_capture_on_commit_callbacks):
    client, me = _annotator(study)
    pid = me["id"]
    bad = client.put(f"/api/v1/participations/{pid}/persona/", {"role": "nurse", "expertise": "guru"}, format="json")
    assert bad.status_code == 400 and "expertise" in bad.json()["extra"]["fields"]
    client.put(f"/api/v1/participations/{pid}/persona/", PERSONA, format="json")
    empty = client.post(f"/api/v1/participations/{pid}/queries/", {"text": "  "}, format="json")
    assert empty.status_code == 400
    assert empty.json() == {
        "message": "Please write your question.",
        "extra": {"fields": {"text": ["Please write your question."]}},
    }
    with django_capture_on_commit_callbacks(execute=True):
        qid = client.post(f"/api/v1/participations/{pid}/queries/", {"text": "sleep"}, format="json").json()["id"]
    match_id = client.get(f"/api/v1/queries/{qid}/current-match/").json()["id"]
    wrong = client.post(f"/api/v1/matches/{match_id}/choice/", {"choice": "both"}, format="json")
    assert wrong.status_code == 400 and "choice" in wrong.json()["extra"]["fields"]
    not_json = client.post(f"/api/v1/matches/{match_id}/choice/", "{oops", content_type="application/json")
    assert not_json.status_code == 400 and not_json.json()["message"]
    assert not Judgment.objects.exists()


def test_others_data_is_404(study, django_capture_on_commit_callbacks):
    owner, me = _annotator(study)
    owner.put(f"/api/v1/participations/{me['id']}/persona/", PERSONA, format="json")
    with django_capture_on_commit_callbacks(execute=True):
        qid = owner.post(f"/api/v1/participations/{me['id']}/queries/", {"text": "sleep"}, format="json").json()["id"]
    match_id = owner.get(f"/api/v1/queries/{qid}/current-match/").json()["id"]
    intruder, _ = _annotator(study)
    assert intruder.get(f"/api/v1/participations/{me['id']}/").status_code == 404
    assert intruder.get(f"/api/v1/queries/{qid}/").status_code == 404
    assert intruder.post(f"/api/v1/matches/{match_id}/choice/", {"choice": "left"}, format="json").status_code == 404
    assert APIClient().get(f"/api/v1/queries/{qid}/").status_code in (401, 403)
    assert not Judgment.objects.exists()
    # Annotators are not admins.
    assert intruder.get("/api/v1/admin/studies/").status_code == 403


def test_admin_api_creates_opens_invites_and_reports_progress():
    admin = get_user_model().objects.create_superuser("root", "r@example.org", "pw")
    client = APIClient()
    client.force_authenticate(admin)
    created = client.post("/api/v1/admin/studies/", {"slug": "s1", "title": "S1"}, format="json")
    assert created.status_code == 201 and len(created.json()["systems"]) == 4
    duplicate = client.post("/api/v1/admin/studies/", {"slug": "s1", "title": "again"}, format="json")
    assert duplicate.status_code == 400
    assert client.post("/api/v1/admin/studies/s1/status/", {"status": "open"}, format="json").json()["status"] == "open"
    links = client.post("/api/v1/admin/studies/s1/invitations/", {"count": 3}, format="json").json()
    assert len(links) == 3 and all("/join/" in i["link"] for i in links)
    too_many = client.post("/api/v1/admin/studies/s1/invitations/", {"count": 5000}, format="json")
    assert too_many.status_code == 400 and "count" in too_many.json()["extra"]["fields"]
    assert client.get("/api/v1/admin/studies/s1/progress/").json() == []
    assert Study.objects.get(slug="s1").invitations.count() == 3


def test_schema_and_docs_are_served():
    client = APIClient()
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/v1/matches/{id}/choice/" in schema.content
    assert client.get("/api/docs/").status_code == 200


def test_admin_retries_every_failed_generation(django_capture_on_commit_callbacks, monkeypatch):
    from annotation.models import Candidate

    # The failure is fixed outside the study (its design is frozen once summaries exist): the model
    # server's API key was missing from the environment.
    monkeypatch.delenv("SATISFY_TEST_LLM_KEY", raising=False)
    with openai_standin() as server:
        study = study_with_a_failing_system(server.base_url, good="ok", bad="broken")
        client, me = _annotator(study)
        client.put(f"/api/v1/participations/{me['id']}/persona/", PERSONA, format="json")
        with django_capture_on_commit_callbacks(execute=True):
            client.post(f"/api/v1/participations/{me['id']}/queries/", {"text": "sleep"}, format="json")
        admin = APIClient()
        admin.force_authenticate(get_user_model().objects.create_superuser("boss", "b@example.org", "pw"))
        failed = admin.get("/api/v1/admin/failed-candidates/").json()
        assert len(failed) == 1 and "SATISFY_TEST_LLM_KEY" in failed[0]["failure_reason"]
        assert failed[0]["model_name"] == "standin-model" and failed[0]["system_label"] == "broken"
        monkeypatch.setenv("SATISFY_TEST_LLM_KEY", "sk-test")
        with django_capture_on_commit_callbacks(execute=True):
            queued = admin.post(f"/api/v1/admin/failed-candidates/retry-all/?study={study.slug}").json()
    assert queued == {"queued": 1}
    assert set(Candidate.objects.values_list("status", flat=True)) == {"done"}
    assert admin.get("/api/v1/admin/failed-candidates/").json() == []
