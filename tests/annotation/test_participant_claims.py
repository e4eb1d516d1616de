"""What a participant can claim: a completion code only when earned (the study's minimum of ranked
questions; earned before a study was paused or closed, it can still be taken), and the study-state rules of the pages held by the API too; the invitation
accept API cannot be used for login CSRF."""

from __future__ import annotations

import pytest
from django.contrib.auth import SESSION_KEY, get_user_model
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Match, Participation, PersonaProfile, Query
from studies.models import Study
from studies.services.invitation import invitation_create_bulk
from tests.annotation.factories import PERSONA, StudyFactory

pytestmark = pytest.mark.django_db

QUESTION = "How does night shift work affect nurses' sleep?"


@pytest.fixture
def study():
    return StudyFactory(slug="claims")


def _api_annotator(study: Study) -> tuple[APIClient, int]:
    invitation = invitation_create_bulk(study=study, count=1)[0]
    accepted = APIClient().post(f"/api/v1/invitations/{invitation.token}/accept/", {"consent": True}, format="json")
    assert accepted.status_code == 201
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {accepted.json()['token']}")
    return client, accepted.json()["id"]


def _set_status(study: Study, status: str) -> None:
    Study.objects.filter(pk=study.pk).update(status=status)


# --- completion codes are earned -------------------------------------------------------------------


def test_a_code_is_not_issued_right_after_consent_on_the_pages_or_the_api(study):
    # The page: consent, then straight to "stop" and confirm.
    browser = Client()
    token = invitation_create_bulk(study=study, count=1)[0].token
    assert browser.post(reverse("annotation:join", args=[token]), {"consent": "on"}).status_code == 302
    done = browser.post(reverse("annotation:finish", args=["claims"]), follow=True).content.decode()
    assert "There is no completion code" in done
    # The API: accept, then finish.
    client, pid = _api_annotator(study)
    finished = client.post(f"/api/v1/participations/{pid}/finish/").json()
    assert finished["completion_code"] == "" and finished["stopped_at"] and finished["min_ranked_questions"] == 1
    assert not Participation.objects.exclude(completion_code="").exists()


def test_the_api_code_is_earned_by_ranking_the_minimum(study, django_capture_on_commit_callbacks):
    client, pid = _api_annotator(study)
    client.put(f"/api/v1/participations/{pid}/persona/", PERSONA, format="json")
    with django_capture_on_commit_callbacks(execute=True):
        qid = client.post(f"/api/v1/participations/{pid}/queries/", {"text": QUESTION}, format="json").json()["id"]
    while (match := client.get(f"/api/v1/queries/{qid}/current-match/")).status_code == 200:
        client.post(f"/api/v1/matches/{match.json()['id']}/choice/", {"choice": "left"}, format="json")
    finished = client.post(f"/api/v1/participations/{pid}/finish/").json()
    assert len(finished["completion_code"]) == 10 and finished["completed_at"] and finished["stopped_at"] is None
    again = client.post(f"/api/v1/participations/{pid}/finish/").json()
    assert again["completion_code"] == finished["completion_code"]  # idempotent


def _rank_one_question(client: APIClient, pid: int, capture) -> None:  # noqa: ANN001 - the fixture's type
    with capture(execute=True):
        qid = client.post(f"/api/v1/participations/{pid}/queries/", {"text": QUESTION}, format="json").json()["id"]
    while (match := client.get(f"/api/v1/queries/{qid}/current-match/")).status_code == 200:
        client.post(f"/api/v1/matches/{match.json()['id']}/choice/", {"choice": "left"}, format="json")
    assert Query.objects.get(pk=qid).status == Query.Status.RANKED


@pytest.mark.parametrize("state", [Study.Status.PAUSED, Study.Status.CLOSED])
def test_a_paused_or_closed_study_issues_no_unearned_code_and_records_no_stop(
    study, state, django_capture_on_commit_callbacks
):
    Study.objects.filter(pk=study.pk).update(min_ranked_questions=2)
    client, pid = _api_annotator(study)
    client.put(f"/api/v1/participations/{pid}/persona/", PERSONA, format="json")
    _rank_one_question(client, pid, django_capture_on_commit_callbacks)  # one of the two the code needs
    _set_status(study, state)
    refused = client.post(f"/api/v1/participations/{pid}/finish/")
    assert refused.status_code == 409 and f"This study is {state}" in refused.json()["message"]
    participation = Participation.objects.get(pk=pid)
    assert (participation.completion_code, participation.completed_at, participation.stopped_at) == ("", None, None)
    # The pages say the same, on the study's page, the stop page and the finish post.
    browser = Client()
    browser.force_login(participation.annotator)
    page = browser.get(reverse("annotation:study", args=["claims"])).content.decode()
    assert "no completion code can be issued" in page and "Finish and get my completion code" not in page
    stop = browser.get(reverse("annotation:stop", args=["claims"]))
    assert stop.status_code == 409 and f"This study is {state}" in stop.content.decode()
    posted = browser.post(reverse("annotation:finish", args=["claims"]))
    assert posted.status_code == 409 and "no completion code can be issued" in posted.content.decode()
    if state == Study.Status.CLOSED:
        assert participation.code in posted.content.decode()  # the reference to ask for compensation with
    participation.refresh_from_db()
    assert (participation.completion_code, participation.completed_at, participation.stopped_at) == ("", None, None)


@pytest.mark.parametrize("state", [Study.Status.PAUSED, Study.Status.CLOSED])
def test_a_code_earned_before_the_study_was_paused_or_closed_can_still_be_taken(
    study, state, django_capture_on_commit_callbacks
):
    """Pausing or closing stops new work, not the code for work done: a crowd worker who had ranked the
    minimum is paid on the platform only with the code (docs/annotators.md)."""
    client, pid = _api_annotator(study)
    client.put(f"/api/v1/participations/{pid}/persona/", PERSONA, format="json")
    _rank_one_question(client, pid, django_capture_on_commit_callbacks)
    _set_status(study, state)
    # The API: the code, once; the same again.
    finished = client.post(f"/api/v1/participations/{pid}/finish/")
    assert finished.status_code == 200 and len(finished.json()["completion_code"]) == 10
    assert client.post(f"/api/v1/participations/{pid}/finish/").json() == finished.json()
    # The pages: another annotator who had earned it too finds the way from the study's page.
    browser = Client()
    token = invitation_create_bulk(study=study, count=1)[0].token
    _set_status(study, Study.Status.OPEN)
    browser.post(reverse("annotation:join", args=[token]), {"consent": "on"})
    participation = Participation.objects.exclude(pk=pid).get(study=study)
    api = APIClient()
    api.force_authenticate(participation.annotator)
    api.put(f"/api/v1/participations/{participation.pk}/persona/", PERSONA, format="json")
    _rank_one_question(api, participation.pk, django_capture_on_commit_callbacks)
    _set_status(study, state)
    page = browser.get(reverse("annotation:study", args=["claims"]))
    assert page.status_code == 403 and "Finish and get my completion code" in page.content.decode()
    assert "no completion code can be issued" not in page.content.decode()
    stop = browser.get(reverse("annotation:stop", args=["claims"]))
    assert stop.status_code == 200 and "Yes, stop and get my code" in stop.content.decode()
    done = browser.post(reverse("annotation:finish", args=["claims"]), follow=True).content.decode()
    participation.refresh_from_db()
    assert len(participation.completion_code) == 10 and participation.completion_code in done


def test_a_crowd_worker_of_a_closed_study_goes_back_to_the_platform_with_the_earned_code(
    study, django_capture_on_commit_callbacks
):
    Study.objects.filter(pk=study.pk).update(
        completion_url="https://app.prolific.com/submissions/complete?cc=C1A2B3", crowd_completion_code="C1A2B3"
    )
    browser = Client()
    browser.post(
        reverse("annotation:join", args=[invitation_create_bulk(study=study, count=1)[0].token]), {"consent": "on"}
    )
    participation = Participation.objects.get(study=study)
    api = APIClient()
    api.force_authenticate(participation.annotator)
    api.put(f"/api/v1/participations/{participation.pk}/persona/", PERSONA, format="json")
    _rank_one_question(api, participation.pk, django_capture_on_commit_callbacks)
    _set_status(study, Study.Status.CLOSED)
    finished = browser.post(reverse("annotation:finish", args=["claims"]))
    assert finished.status_code == 302 and finished["Location"].startswith("https://app.prolific.com/")


def test_progress_tells_completed_from_stopped(study, django_capture_on_commit_callbacks):
    stopper, stopper_id = _api_annotator(study)
    stopper.post(f"/api/v1/participations/{stopper_id}/finish/")
    _api_annotator(study)  # still in progress
    admin = APIClient()
    admin.force_authenticate(get_user_model().objects.create_superuser("root", "r@example.org", "pw"))
    rows = admin.get("/api/v1/admin/studies/claims/progress/").json()
    by_code = {row["code"]: row for row in rows}
    stopped = by_code[Participation.objects.get(pk=stopper_id).code]
    assert stopped["outcome"] == "stopped" and stopped["stopped_at"] and stopped["completed_at"] is None
    assert sorted(row["outcome"] for row in rows) == ["in_progress", "stopped"]


@pytest.mark.parametrize(
    ("value", "accepted"), [(0, False), (1, True), (8, True), (9, False), ("two", False), (None, False)]
)
def test_the_minimum_is_a_study_setting_from_1_to_the_questions_per_annotator(study, value, accepted):
    admin = APIClient()
    admin.force_authenticate(get_user_model().objects.create_superuser("root", "r@example.org", "pw"))
    response = admin.patch("/api/v1/admin/studies/claims/", {"min_ranked_questions": value}, format="json")
    if accepted:
        assert response.status_code == 200 and response.json()["min_ranked_questions"] == value
        assert Study.objects.get(pk=study.pk).min_ranked_questions == value
    else:
        assert response.status_code == 400 and "min_ranked_questions" in response.json()["extra"]["fields"]
        assert Study.objects.get(pk=study.pk).min_ranked_questions == 1


def test_the_questions_per_annotator_cannot_drop_below_the_minimum(study):
    admin = APIClient()
    admin.force_authenticate(get_user_model().objects.create_superuser("root", "r@example.org", "pw"))
    assert admin.patch("/api/v1/admin/studies/claims/", {"min_ranked_questions": 5}, format="json").status_code == 200
    lowered = admin.patch("/api/v1/admin/studies/claims/", {"queries_per_annotator": 4}, format="json")
    assert lowered.status_code == 400 and "min_ranked_questions" in lowered.json()["extra"]["fields"]
    assert Study.objects.get(pk=study.pk).queries_per_annotator == 8


# --- the study-state rules, on the API as on the pages ---------------------------------------------

PAUSED_OR_CLOSED = {Study.Status.PAUSED: "paused", Study.Status.CLOSED: "not open"}


@pytest.mark.parametrize("state", list(PAUSED_OR_CLOSED))
def test_persona_edits_are_refused_unless_the_study_is_open(study, state):
    client, pid = _api_annotator(study)
    _set_status(study, state)
    refused = client.put(f"/api/v1/participations/{pid}/persona/", PERSONA, format="json")
    assert refused.status_code == 403 and PAUSED_OR_CLOSED[state] in refused.json()["message"]
    assert not PersonaProfile.objects.exists()


def test_persona_edits_are_refused_once_the_participation_has_ended(study):
    client, pid = _api_annotator(study)
    client.post(f"/api/v1/participations/{pid}/finish/")
    refused = client.put(f"/api/v1/participations/{pid}/persona/", PERSONA, format="json")
    assert refused.status_code == 409 and "already finished" in refused.json()["message"]
    assert not PersonaProfile.objects.exists()


@pytest.mark.parametrize("state", list(PAUSED_OR_CLOSED))
@pytest.mark.parametrize("action", ["retry", "discard"])
def test_try_again_and_set_aside_are_refused_unless_the_study_is_open(
    study, state, action, django_capture_on_commit_callbacks
):
    client, pid = _api_annotator(study)
    client.put(f"/api/v1/participations/{pid}/persona/", PERSONA, format="json")
    with django_capture_on_commit_callbacks():  # no worker: the question stays in retrieving
        qid = client.post(f"/api/v1/participations/{pid}/queries/", {"text": QUESTION}, format="json").json()["id"]
    _set_status(study, state)
    with django_capture_on_commit_callbacks() as sent:
        refused = client.post(f"/api/v1/queries/{qid}/{action}/")
    assert refused.status_code == 403 and PAUSED_OR_CLOSED[state] in refused.json()["message"]
    assert not sent  # nothing sent to the queue
    assert Query.objects.get(pk=qid).status == Query.Status.RETRIEVING
    # The pages refuse the same posts, and the waiting page shows the notice instead of the buttons.
    browser = Client()
    browser.force_login(Participation.objects.get(pk=pid).annotator)
    assert browser.post(reverse(f"annotation:{action}", args=["claims", 1])).status_code == 403
    assert browser.get(reverse("annotation:wait", args=["claims", 1])).status_code == 403
    assert Query.objects.get(pk=qid).status == Query.Status.RETRIEVING


@pytest.mark.parametrize("action", ["retry", "discard"])
def test_try_again_and_set_aside_are_refused_once_the_participation_has_ended(
    study, action, django_capture_on_commit_callbacks
):
    client, pid = _api_annotator(study)
    client.put(f"/api/v1/participations/{pid}/persona/", PERSONA, format="json")
    with django_capture_on_commit_callbacks():
        qid = client.post(f"/api/v1/participations/{pid}/queries/", {"text": QUESTION}, format="json").json()["id"]
    client.post(f"/api/v1/participations/{pid}/finish/")
    with django_capture_on_commit_callbacks() as sent:
        response = client.post(f"/api/v1/queries/{qid}/{action}/")
    if action == "retry":
        assert response.status_code == 409 and "already finished" in response.json()["message"] and not sent
    else:  # setting aside a question already set aside by the stop is the harmless repeat
        assert response.status_code == 200 and response.json()["set_aside_reason"] == "stopped"


@pytest.mark.parametrize("state", list(PAUSED_OR_CLOSED))
def test_fetching_a_match_records_no_shown_time_unless_the_study_is_open(
    study, state, django_capture_on_commit_callbacks
):
    client, pid = _api_annotator(study)
    client.put(f"/api/v1/participations/{pid}/persona/", PERSONA, format="json")
    with django_capture_on_commit_callbacks(execute=True):
        qid = client.post(f"/api/v1/participations/{pid}/queries/", {"text": QUESTION}, format="json").json()["id"]
    first = Match.objects.filter(bracket__query_id=qid).order_by("index").first()
    _set_status(study, state)
    current = client.get(f"/api/v1/queries/{qid}/current-match/")
    assert current.status_code == 403 and PAUSED_OR_CLOSED[state] in current.json()["message"]
    retrieved = client.get(f"/api/v1/matches/{first.pk}/")
    assert retrieved.status_code == 403
    assert not Match.objects.filter(shown_at__isnull=False).exists()
    # Reopened, the same fetch records it.
    _set_status(study, Study.Status.OPEN)
    assert client.get(f"/api/v1/queries/{qid}/current-match/").json()["shown_at"] is not None


# --- login CSRF on the accept API ------------------------------------------------------------------


def test_a_foreign_page_cannot_replace_a_signed_in_annotators_session(study):
    # The victim joined through the invitation page and is part-way through the study.
    victim = Client(enforce_csrf_checks=True)
    join = reverse("annotation:join", args=[invitation_create_bulk(study=study, count=1)[0].token])
    page = victim.get(join)
    victim.post(join, {"consent": "on", "csrfmiddlewaretoken": page.context["csrf_token"]})
    victim_id = int(victim.session[SESSION_KEY])
    cookie = victim.cookies["sessionid"].value
    # The attacker's page makes the victim's browser post the accept API of the attacker's invitation
    # (another study), with the victim's cookies and no CSRF token.
    other = StudyFactory(slug="attacker")
    attacker_token = invitation_create_bulk(study=other, count=1)[0].token
    forged = victim.post(
        f"/api/v1/invitations/{attacker_token}/accept/", {"consent": "true"}, content_type="application/json"
    )
    assert forged.status_code == 403 and "CSRF" in forged.json()["message"]
    assert "sessionid" not in forged.cookies  # no session was set, nor replaced
    assert victim.cookies["sessionid"].value == cookie
    assert int(victim.session[SESSION_KEY]) == victim_id
    # The victim's session still leads to their own participation, which is intact.
    assert victim.get(reverse("annotation:study", args=["claims"]))["Location"].endswith("/claims/profile/")
    assert Participation.objects.get(annotator_id=victim_id).study == study
    assert not Participation.objects.filter(annotator_id=victim_id, study=other).exists()


def test_the_accept_api_never_signs_a_browser_in(study):
    browser = Client(enforce_csrf_checks=True)
    token = invitation_create_bulk(study=study, count=1)[0].token
    accepted = browser.post(f"/api/v1/invitations/{token}/accept/", {"consent": True}, content_type="application/json")
    assert accepted.status_code == 201 and accepted.json()["token"]
    assert "sessionid" not in accepted.cookies and SESSION_KEY not in browser.session
    # The pages do not know this browser; the token is the only way in.
    assert browser.get(reverse("annotation:study", args=["claims"]))["Location"].startswith("/?next=")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {accepted.json()['token']}")
    assert api.get(f"/api/v1/participations/{accepted.json()['id']}/").status_code == 200


def test_a_browser_signed_in_by_the_invitation_page_gets_its_api_token_with_csrf(study):
    browser = Client(enforce_csrf_checks=True)
    join = reverse("annotation:join", args=[invitation_create_bulk(study=study, count=1)[0].token])
    csrf = browser.get(join).context["csrf_token"]
    browser.post(join, {"consent": "on", "csrfmiddlewaretoken": csrf})
    own = Participation.objects.get()
    again = invitation_create_bulk(study=study, count=1)[0]
    accepted = browser.post(
        f"/api/v1/invitations/{again.token}/accept/",
        {"consent": True},
        content_type="application/json",
        HTTP_X_CSRFTOKEN=browser.cookies["csrftoken"].value,
    )
    assert accepted.status_code == 200 and accepted.json()["id"] == own.pk and accepted.json()["token"]
    again.refresh_from_db()
    assert again.uses == 0 and Participation.objects.count() == 1


def test_after_stopping_the_pages_of_the_journey_lead_to_the_stop_page(study, django_capture_on_commit_callbacks):
    client, pid = _api_annotator(study)
    client.put(f"/api/v1/participations/{pid}/persona/", PERSONA, format="json")
    with django_capture_on_commit_callbacks(execute=True):
        qid = client.post(f"/api/v1/participations/{pid}/queries/", {"text": QUESTION}, format="json").json()["id"]
    client.post(f"/api/v1/participations/{pid}/finish/")  # stopped part-way through the question's matches
    browser = Client()
    browser.force_login(Participation.objects.get(pk=pid).annotator)
    done = reverse("annotation:done", args=["claims"])
    assert browser.get(reverse("annotation:compare", args=["claims", 1]))["Location"] == reverse(
        "annotation:study", args=["claims"]
    )
    assert browser.get(reverse("annotation:profile", args=["claims"]))["Location"] == done
    assert browser.get(reverse("annotation:stop", args=["claims"]))["Location"] == done
    # The API refuses to show the stopped question's matches, and records nothing.
    shown = client.get(f"/api/v1/queries/{qid}/current-match/")
    assert shown.status_code == 409 and "already finished" in shown.json()["message"]
    assert not Match.objects.filter(shown_at__isnull=False).exists()


def test_the_admin_edits_the_minimum_under_the_same_rules(study, client):
    from tests.studies.test_study_rules import _change_url, _form_data

    client.force_login(get_user_model().objects.create_superuser("root", "r@example.org", "pw"))
    assert 'name="min_ranked_questions"' in client.get(_change_url(study)).content.decode()
    refused = client.post(_change_url(study), _form_data(study, min_ranked_questions=9))
    assert refused.status_code == 200
    assert "from 1 to the questions per annotator (8)" in refused.content.decode()
    assert Study.objects.get(pk=study.pk).min_ranked_questions == 1
    assert client.post(_change_url(study), _form_data(study, min_ranked_questions=3)).status_code == 302
    assert Study.objects.get(pk=study.pk).min_ranked_questions == 3


@pytest.mark.parametrize("state", list(PAUSED_OR_CLOSED))
def test_answers_and_new_questions_are_refused_unless_the_study_is_open(
    study, state, django_capture_on_commit_callbacks
):
    client, pid = _api_annotator(study)
    client.put(f"/api/v1/participations/{pid}/persona/", PERSONA, format="json")
    with django_capture_on_commit_callbacks(execute=True):
        qid = client.post(f"/api/v1/participations/{pid}/queries/", {"text": QUESTION}, format="json").json()["id"]
    match_id = client.get(f"/api/v1/queries/{qid}/current-match/").json()["id"]
    _set_status(study, state)
    answer = client.post(f"/api/v1/matches/{match_id}/choice/", {"choice": "left"}, format="json")
    assert answer.status_code == 403 and PAUSED_OR_CLOSED[state] in answer.json()["message"]
    asked = client.post(f"/api/v1/participations/{pid}/queries/", {"text": "another"}, format="json")
    assert asked.status_code == 403
    assert not Match.objects.filter(status=Match.Status.ANSWERED).exists() and Query.objects.count() == 1
