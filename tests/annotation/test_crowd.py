"""Crowd recruitment (docs/crowd.md) through the pages and the admin API: the open link with its cap and expiry,
the recruiting platform's ids and their pseudonyms in the comparison table, screen-out both ways, the resume
link on another browser, the completion redirect, and previews that never reach the analysis."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from analysis.selectors import comparison_rows
from annotation.models import Participation, Query
from annotation.selectors.study import study_progress
from annotation.selectors.tournament import match_current
from annotation.services.participation import ExternalIds, open_link_join, participation_finish
from annotation.services.persona import persona_save
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record
from kernel.exceptions import ApplicationError
from kernel.logging import RedactTokensFilter
from studies.models import Study, StudyMembership
from studies.services.invitation import invitation_create_bulk
from studies.services.study import study_update
from tests.annotation.factories import PERSONA, StudyFactory

pytestmark = pytest.mark.django_db

COMPLETE = "https://app.prolific.com/submissions/complete?cc=C1A2B3"
RETURN = "https://app.prolific.com/submissions/complete?cc=SCREENED"


def crowd_study(**extra):  # type: ignore[no-untyped-def]
    return StudyFactory(
        open_link_enabled=True,
        completion_url=COMPLETE,
        crowd_completion_code="C1A2B3",
        screen_out_url=RETURN,
        queries_per_annotator=1,
        **extra,
    )


def arrive(study: Study, pid: str, client: Client | None = None, **params: str):  # type: ignore[no-untyped-def]
    client = client or Client()
    query = {"PROLIFIC_PID": pid, "STUDY_ID": "st-1", "SESSION_ID": f"se-{pid}", **params}
    return client, client.get(f"/open/{study.open_link_token}/", query)


def consent(client: Client, study: Study, pid: str, **form: str):  # type: ignore[no-untyped-def]
    query = f"?PROLIFIC_PID={pid}&STUDY_ID=st-1&SESSION_ID=se-{pid}"
    return client.post(f"/open/{study.open_link_token}/{query}", form or {"consent": "on"})


def owner_api() -> APIClient:
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_superuser("root", "root@example.org", "pw"))
    return client


def play(participation: Participation, captured) -> None:  # type: ignore[no-untyped-def]
    """One question answered to the end through the services, on the offline backends."""
    if not participation.personas.exists():
        persona_save(participation=participation, data=PERSONA)
    with captured(execute=True):
        query = query_submit(participation=participation, text="How do night shifts affect sleep?", client_token="")
    while (match := match_current(query=query)) is not None:
        judgment_record(match=match, choice="left", by=participation)


def test_the_same_prolific_id_arriving_twice_resumes_one_participation():
    study = crowd_study()
    client, page = arrive(study, "5f00aa")
    assert page.status_code == 200 and "agree to take part" in page.text
    assert consent(client, study, "5f00aa").url == f"/study/{study.slug}/"
    (participation,) = Participation.objects.filter(study=study)
    assert (participation.external_id, participation.external_study_id, participation.external_session_id) == (
        "5f00aa",
        "st-1",
        "se-5f00aa",
    )
    assert participation.source == "open_link" and participation.consented_at is not None

    # The same id in the same browser (Prolific's return to the study) lands in the same participation.
    _, again = arrive(study, "5f00aa", client)
    assert again.status_code == 302 and again.url == f"/study/{study.slug}/"
    assert client.get(again.url).url == f"/study/{study.slug}/profile/"
    # On a fresh browser (and posting consent again) it starts nothing new and is not signed in as that
    # participant: it needs the resume link (tests/annotation/test_crowd_keys.py).
    other, elsewhere = arrive(study, "5f00aa")
    assert elsewhere.status_code == 403 and "already been used to start this study" in elsewhere.text
    assert consent(other, study, "5f00aa").status_code == 403
    assert Participation.objects.filter(study=study).count() == 1
    assert "_auth_user_id" not in other.session

    # A generic platform's id by the study's own parameter name (MTurk's workerId).
    study_update(study=study, external_id_param="workerId")
    mturk = Client()
    mturk.get(f"/open/{study.open_link_token}/", {"workerId": "A1B2"})
    mturk.post(f"/open/{study.open_link_token}/?workerId=A1B2", {"consent": "on"})
    assert Participation.objects.get(study=study, external_id="A1B2").external_study_id == ""


def test_a_full_or_expired_open_link_refuses_new_participants_with_a_page():
    study = crowd_study(participant_cap=1)
    client, _ = arrive(study, "first")
    consent(client, study, "first")
    _, full = arrive(study, "second")
    assert full.status_code == 403 and "all the participants it needs" in full.text
    assert consent(Client(), study, "second").status_code == 403
    # The one who joined still gets back in; a cap of 2 lets the second in.
    assert arrive(study, "first", client)[1].status_code == 302
    study_update(study=study, participant_cap=2)
    assert arrive(study, "second")[1].status_code == 200

    Study.objects.filter(pk=study.pk).update(open_link_expires_at=timezone.now() - timedelta(minutes=1))
    _, expired = arrive(study, "third")
    assert expired.status_code == 410 and "no longer accepting participants" in expired.text
    assert arrive(study, "first", client)[1].status_code == 302  # who joined before the expiry still comes back
    study_update(study=study, open_link_enabled=False)
    assert arrive(study, "third")[1].status_code == 404
    assert Participation.objects.filter(study=study).count() == 1


def test_a_participant_who_stops_without_a_code_gives_their_place_back(django_capture_on_commit_callbacks):
    """Prolific reopens a returned place and sends someone else: with the place still counted, the newcomer
    found the study full and the places paid for were never all filled. Who earned the code keeps theirs."""
    study = crowd_study(participant_cap=2)
    quitter, _ = arrive(study, "quitter")
    consent(quitter, study, "quitter")
    worker, _ = arrive(study, "worker")
    consent(worker, study, "worker")
    worker.post(f"/study/{study.slug}/profile/", PERSONA)
    play(Participation.objects.get(external_id="worker"), django_capture_on_commit_callbacks)
    assert arrive(study, "newcomer")[1].status_code == 403  # both places taken
    quitter.post(f"/study/{study.slug}/finish/")  # stops with nothing ranked: no code
    assert Participation.objects.get(external_id="quitter").stopped_at is not None
    newcomer, page = arrive(study, "newcomer")
    assert page.status_code == 200 and consent(newcomer, study, "newcomer").status_code == 302
    # The one who earned the code holds the place after finishing: the study is full again.
    assert worker.post(f"/study/{study.slug}/finish/").url == COMPLETE
    assert arrive(study, "late")[1].status_code == 403
    # The quitter, back through the link with their id, is at their end page, not refused as "full".
    assert arrive(study, "quitter", quitter)[1].status_code == 302


def test_a_participant_past_the_platforms_time_allowed_no_longer_holds_a_place(django_capture_on_commit_callbacks):
    """Prolific times out a submission after its "maximum time allowed" and sends someone else: the study's
    `place_timeout_minutes`, set to the same, frees the place of whoever joined that long ago and has not
    finished. A finished participant keeps theirs whenever they joined; the one timed out can still finish."""
    study = crowd_study(participant_cap=2, place_timeout_minutes=60)
    gone, _ = arrive(study, "gone")
    consent(gone, study, "gone")
    done, _ = arrive(study, "done")
    consent(done, study, "done")
    done.post(f"/study/{study.slug}/profile/", PERSONA)
    play(Participation.objects.get(external_id="done"), django_capture_on_commit_callbacks)
    assert done.post(f"/study/{study.slug}/finish/").url == COMPLETE
    assert arrive(study, "newcomer")[1].status_code == 403
    long_ago = timezone.now() - timedelta(minutes=61)
    Participation.objects.filter(study=study).update(created_at=long_ago)  # both joined over an hour ago
    newcomer, page = arrive(study, "newcomer")
    assert page.status_code == 200 and consent(newcomer, study, "newcomer").status_code == 302
    assert arrive(study, "late")[1].status_code == 403  # the finished one and the newcomer hold the two
    # The timed-out participant comes back and carries on where they were.
    back, page = arrive(study, "gone", client=gone)
    assert page.status_code == 302 and back.get(page.url).url == f"/study/{study.slug}/profile/"
    # The setting's bounds, through the API (the admin's form shares the service's rule).
    api = owner_api()
    for bad in (0, -5, "an hour", True, 50_000):
        refused = api.patch(f"/api/v1/admin/studies/{study.slug}/", {"place_timeout_minutes": bad}, format="json")
        assert refused.status_code == 400 and "place_timeout_minutes" in refused.json()["extra"]["fields"], bad
    cleared = api.patch(f"/api/v1/admin/studies/{study.slug}/", {"place_timeout_minutes": None}, format="json")
    assert cleared.status_code == 200
    assert arrive(study, "late")[1].status_code == 403  # without it, the timed-out place is held again


def test_declining_consent_screens_out_and_returns_to_the_platform():
    study = crowd_study()
    client, _ = arrive(study, "decliner")
    declined = consent(client, study, "decliner", decline="1")
    assert declined.status_code == 302 and declined.url == RETURN
    participation = Participation.objects.get(study=study, external_id="decliner")
    assert participation.screen_out_reason == "declined_consent" and participation.consented_at is None
    assert client.get(f"/study/{study.slug}/").url == f"/study/{study.slug}/done/"
    assert "This study has ended for you" in client.get(f"/study/{study.slug}/done/").text
    # Coming back with the same id is not asked again; screened out, it does not count toward a cap of 1.
    assert arrive(study, "decliner", client)[1].status_code == 302
    study_update(study=study, participant_cap=1)
    assert arrive(study, "someone-else")[1].status_code == 200

    # Without a screen-out address the annotator gets a page saying so.
    study_update(study=study, screen_out_url="")
    client, _ = arrive(study, "decliner-2")
    page = consent(client, study, "decliner-2", decline="1")
    assert page.status_code == 200 and "This study has ended for you" in page.text


def test_the_screening_question_comes_before_the_persona_and_screens_out_a_wrong_answer():
    study = crowd_study(
        screening_question="Do you work in healthcare?",
        screening_choices=["Yes", "No", "Prefer not to say"],
        screening_accepted=["Yes"],
    )
    passes, _ = arrive(study, "nurse")
    consent(passes, study, "nurse")
    assert passes.get(f"/study/{study.slug}/").url == f"/study/{study.slug}/screening/"
    assert passes.get(f"/study/{study.slug}/profile/").url == f"/study/{study.slug}/screening/"
    page = passes.get(f"/study/{study.slug}/screening/")
    assert "Do you work in healthcare?" in page.text and "Prefer not to say" in page.text
    assert passes.post(f"/study/{study.slug}/screening/", {"answer": "Maybe"}).status_code == 400
    assert passes.post(f"/study/{study.slug}/screening/", {"answer": "Yes"}).url == f"/study/{study.slug}/"
    assert passes.get(f"/study/{study.slug}/").url == f"/study/{study.slug}/profile/"

    fails, _ = arrive(study, "student")
    consent(fails, study, "student")
    out = fails.post(f"/study/{study.slug}/screening/", {"answer": "No"})
    assert out.status_code == 302 and out.url == RETURN
    participation = Participation.objects.get(external_id="student")
    assert (participation.screening_answer, participation.screen_out_reason) == ("No", "screening")
    assert fails.get(f"/study/{study.slug}/profile/").url == f"/study/{study.slug}/done/"
    # An answer sent again afterwards changes nothing.
    fails.post(f"/study/{study.slug}/screening/", {"answer": "Yes"})
    assert Participation.objects.get(external_id="student").screen_out_reason == "screening"


SCREENING = {"screening_question": "Do you work in healthcare?", "screening_choices": ["Yes", "No"]}


def test_a_screening_question_added_midway_is_asked_only_of_those_not_yet_past_it(django_capture_on_commit_callbacks):
    study = crowd_study()
    study_update(study=study, queries_per_annotator=3, min_ranked_questions=1)
    # One annotator has ranked question 1 (the study's minimum) and is on question 2's first comparison.
    client, _ = arrive(study, "at-work")
    consent(client, study, "at-work")
    client.post(f"/study/{study.slug}/profile/", PERSONA)
    working = Participation.objects.get(external_id="at-work")
    play(working, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        second = query_submit(participation=working, text="Which shift patterns reduce fatigue?", client_token="")
    compare = f"/study/{study.slug}/q/{second.index}/compare/"
    assert client.get(compare).status_code == 200
    # Another has agreed but not yet described themselves.
    before, _ = arrive(study, "just-arrived")
    consent(before, study, "just-arrived")

    study_update(study=study, **SCREENING, screening_accepted=["Yes"])

    # The annotator at work carries on: their answer is recorded and the next comparison follows.
    match = match_current(query=second)
    answered = client.post(compare, {"match_id": match.pk, "choice": "left"})
    assert answered.status_code == 302 and client.get(answered.url).url == compare
    assert client.get(f"/study/{study.slug}/screening/").url == f"/study/{study.slug}/"
    client.post(f"/study/{study.slug}/screening/", {"answer": "No"})  # posted anyway: not asked, nothing changes
    api = APIClient()
    api.force_authenticate(working.annotator)
    refused = api.post(f"/api/v1/participations/{working.pk}/screening/", {"answer": "No"}, format="json")
    assert refused.status_code == 409 and "already started the study when it was added" in refused.json()["message"]
    assert api.get(f"/api/v1/participations/{working.pk}/").json()["screening"] is None
    working.refresh_from_db()
    assert (working.screened_out_at, working.screening_answer) == (None, "")
    assert Query.objects.get(pk=second.pk).status == "ready"  # question 2 is not set aside
    # They finish with the completion code they earned, and question 1's answers stay in the analysis.
    assert client.post(f"/study/{study.slug}/finish/").url == COMPLETE
    working.refresh_from_db()
    assert working.completed_at is not None and working.completion_code
    assert {r["annotator"] for r in comparison_rows(study=study, with_scores=False)} == {working.code}

    # Whoever had not passed the question yet is asked it, and screened by it.
    assert before.get(f"/study/{study.slug}/").url == f"/study/{study.slug}/screening/"
    assert before.post(f"/study/{study.slug}/screening/", {"answer": "No"}).url == RETURN
    assert Participation.objects.get(external_id="just-arrived").screen_out_reason == "screening"


def test_the_admin_warns_that_a_screening_question_added_midway_does_not_reach_those_already_past_it():
    from tests.studies.test_admin_races import _loaded_state
    from tests.studies.test_study_rules import _change_url, _form_data

    study = crowd_study()
    at_work, _ = arrive(study, "at-work")
    consent(at_work, study, "at-work")
    at_work.post(f"/study/{study.slug}/profile/", PERSONA)  # past the point the question is asked at
    before, _ = arrive(study, "just-arrived")
    consent(before, study, "just-arrived")  # not yet: they will be asked
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("root", "r@example.org", "pw"))
    fields = {"screening_choices": json.dumps(SCREENING["screening_choices"]), "screening_accepted": '["Yes"]'}
    form = _form_data(study, screening_question=SCREENING["screening_question"]) | fields
    page = admin.get(_change_url(study)).content.decode()
    saved = admin.post(_change_url(study), form | {"loaded_state": _loaded_state(page)}, follow=True)
    shown = [str(m) for m in saved.context["messages"]]
    assert any("the 1 annotator(s) already past it and still at work will not be asked it" in m for m in shown)
    assert Study.objects.get(pk=study.pk).screening_question == SCREENING["screening_question"]
    # A later save that leaves the question alone says nothing of it.
    study.refresh_from_db()
    page = admin.get(_change_url(study)).content.decode()
    form = _form_data(study, title="Renamed", screening_question=study.screening_question) | fields
    saved = admin.post(_change_url(study), form | {"loaded_state": _loaded_state(page)}, follow=True)
    shown = [str(m) for m in saved.context["messages"]]
    assert shown and not any("screening" in m for m in shown), shown


def test_the_screening_question_cannot_be_skipped_through_the_api():
    study = crowd_study(**SCREENING, screening_accepted=["Yes"])
    study_update(study=study, queries_per_annotator=2)
    question = {"text": "How do night shifts affect sleep?"}
    # An app that accepted an invitation over the API with its token.
    invitation = invitation_create_bulk(study=study, count=1)[0]
    api = APIClient()
    accepted = api.post(f"/api/v1/invitations/{invitation.token}/accept/", {"consent": True}, format="json").json()
    me = f"/api/v1/participations/{accepted['id']}/"
    api.credentials(HTTP_AUTHORIZATION=f"Token {accepted['token']}")
    for response in (api.put(f"{me}persona/", PERSONA, format="json"), api.post(f"{me}queries/", question)):
        assert response.status_code == 409, response.content
        assert response.json()["message"] == "Please answer the study's screening question first."
        assert response.json()["extra"]["screening"]["answer_at"] == f"{me}screening/"
    # The participation shows the question to answer, from the accept on.
    assert accepted["screening"] == {"question": "Do you work in healthcare?", "choices": ["Yes", "No"]}
    assert api.get(me).json()["screening"] == accepted["screening"]
    participation = Participation.objects.get(pk=accepted["id"])
    assert not participation.personas.exists() and not participation.queries.exists()
    # Someone else cannot answer it; a choice not offered is a 400 naming the field, and nothing is kept.
    stranger = APIClient()
    stranger.force_authenticate(get_user_model().objects.create_user("stranger"))
    assert stranger.post(f"{me}screening/", {"answer": "Yes"}, format="json").status_code == 404
    maybe = api.post(f"{me}screening/", {"answer": "Maybe"}, format="json")
    assert maybe.status_code == 400 and "answer" in maybe.json()["extra"]["fields"]
    assert api.post(f"{me}screening/", {}, format="json").status_code == 400
    # Answered: then the persona and questions; the same answer again changes nothing, another is refused.
    answered = api.post(f"{me}screening/", {"answer": "Yes"}, format="json")
    assert answered.status_code == 200
    assert (answered.json()["screening"], answered.json()["screening_answer"]) == (None, "Yes")
    assert api.post(f"{me}screening/", {"answer": "Yes"}, format="json").json() == answered.json()
    changed = api.post(f"{me}screening/", {"answer": "No"}, format="json")
    assert changed.status_code == 409 and "already been answered" in changed.json()["message"]
    assert api.put(f"{me}persona/", PERSONA, format="json").status_code == 200
    assert api.post(f"{me}queries/", question, format="json").status_code == 201
    # A refused answer screens the participation out, and the body says so.
    other = invitation_create_bulk(study=study, count=1)[0]
    api = APIClient()
    accepted = api.post(f"/api/v1/invitations/{other.token}/accept/", {"consent": True}, format="json").json()
    api.credentials(HTTP_AUTHORIZATION=f"Token {accepted['token']}")
    out = api.post(f"/api/v1/participations/{accepted['id']}/screening/", {"answer": "No"}, format="json").json()
    assert (out["screen_out_reason"], out["screening"], out["completion_code"]) == ("screening", None, "")
    assert out["screened_out_at"]
    assert api.put(f"/api/v1/participations/{accepted['id']}/persona/", PERSONA, format="json").status_code == 409

    # A browser participant sending the persona with their session and CSRF token, then a question to the page.
    browser, _ = arrive(study, "browser")
    consent(browser, study, "browser")
    participation = Participation.objects.get(external_id="browser")
    web = Client(enforce_csrf_checks=True)
    web.cookies = browser.cookies
    web.get(f"/study/{study.slug}/screening/")
    refused = web.put(
        f"/api/v1/participations/{participation.pk}/persona/",
        json.dumps(PERSONA),
        content_type="application/json",
        HTTP_X_CSRFTOKEN=web.cookies["csrftoken"].value,
    )
    assert refused.status_code == 409
    asked = browser.post(f"/study/{study.slug}/ask/", {**question, "client_token": "x1"})
    assert asked.status_code == 302 and asked.url == f"/study/{study.slug}/screening/"
    assert browser.get(f"/study/{study.slug}/ask/").url == f"/study/{study.slug}/screening/"
    participation.refresh_from_db()
    assert participation.screening_answer == ""
    assert not participation.personas.exists() and not participation.queries.exists()


def test_the_resume_link_restores_the_participation_in_another_browser(django_capture_on_commit_callbacks):
    study = crowd_study()
    study_update(study=study, queries_per_annotator=2)
    first, _ = arrive(study, "traveller")
    consent(first, study, "traveller")
    first.post(f"/study/{study.slug}/profile/", PERSONA)
    ask = first.get(f"/study/{study.slug}/ask/")
    participation = Participation.objects.get(external_id="traveller")
    link = f"/resume/{participation.resume_token}/"
    assert link in ask.text and "Continue on another device" in ask.text
    play(participation, django_capture_on_commit_callbacks)

    second = Client()
    restored = second.get(link)
    assert restored.status_code == 302 and restored.url == f"/study/{study.slug}/"
    # The second browser is where the first one is: question 2, the first one ranked.
    assert second.get(restored.url).url == f"/study/{study.slug}/ask/"
    assert "Question 2 of 2" in second.get(f"/study/{study.slug}/ask/").text
    assert second.get("/resume/not-a-token/").status_code == 404


def test_the_api_gives_the_participant_their_resume_link_and_a_preview_none():
    study = crowd_study()
    client, _ = arrive(study, "api-traveller")
    consent(client, study, "api-traveller")
    participation = Participation.objects.get(external_id="api-traveller")
    api = APIClient()
    api.force_authenticate(participation.annotator)
    (listed,) = api.get("/api/v1/participations/").json()
    link = listed["resume_url"]
    assert link and link == api.get(f"/api/v1/participations/{participation.pk}/").json()["resume_url"]
    # The link the API gives signs another browser in as this participant.
    other = Client()
    path = link.removeprefix(settings.SITE_URL.rstrip("/"))
    assert other.get(path).url == f"/study/{study.slug}/"
    assert int(other.session["_auth_user_id"]) == participation.annotator_id

    researcher = get_user_model().objects.create_user("api-designer", password="pw")
    StudyMembership.objects.create(study=study, user=researcher, role="researcher")
    web = Client()
    web.force_login(researcher)
    web.post(f"/study/{study.slug}/preview/")
    api.force_authenticate(researcher)
    (preview,) = api.get("/api/v1/participations/").json()
    assert preview["resume_url"] is None  # a preview is never restored by a link, nor a password account


def test_finishing_redirects_to_the_completion_url_with_the_study_code(django_capture_on_commit_callbacks):
    study = crowd_study()
    study_update(study=study, queries_per_annotator=2)
    client, _ = arrive(study, "finisher")
    consent(client, study, "finisher")
    participation = Participation.objects.get(external_id="finisher")
    play(participation, django_capture_on_commit_callbacks)
    finished = client.post(f"/study/{study.slug}/finish/")
    assert finished.status_code == 302 and finished.url == COMPLETE
    done = client.get(f"/study/{study.slug}/done/").text
    assert 'id="completion-code">C1A2B3<' in done and f'href="{COMPLETE}"' in done.replace("&amp;", "&")

    # A study without crowd settings keeps per-participant codes and the done page.
    plain = StudyFactory(queries_per_annotator=2, open_link_enabled=True)
    client, _ = arrive(plain, "plain")
    consent(client, plain, "plain")
    participation = Participation.objects.get(study=plain)
    play(participation, django_capture_on_commit_callbacks)
    assert client.post(f"/study/{plain.slug}/finish/").url == f"/study/{plain.slug}/done/"
    participation.refresh_from_db()
    assert f'id="completion-code">{participation.completion_code}<' in client.get(f"/study/{plain.slug}/done/").text


def expected_pseudonym(study: Study, pid: str) -> str:
    """The keyed hash docs/crowd.md describes, computed here from its definition."""
    key = hashlib.sha256(b"satisfy.external-id:" + settings.SECRET_KEY.encode()).digest()
    return "x-" + hmac.new(key, f"{study.slug}\x00{pid}".encode(), hashlib.sha256).hexdigest()[:20]


def test_exports_carry_a_keyed_pseudonym_of_the_platform_id_and_leave_out_previews_and_screen_outs(
    django_capture_on_commit_callbacks,
):
    study = crowd_study(screening_question="Adult?", screening_choices=["Yes", "No"], screening_accepted=["Yes"])
    client, _ = arrive(study, "pid-one")
    consent(client, study, "pid-one")
    client.post(f"/study/{study.slug}/screening/", {"answer": "Yes"})
    play(Participation.objects.get(external_id="pid-one"), django_capture_on_commit_callbacks)
    # A screened-out participation with answers (a later quality policy may screen out mid-study).
    client, _ = arrive(study, "pid-out")
    consent(client, study, "pid-out")
    client.post(f"/study/{study.slug}/screening/", {"answer": "Yes"})
    out = Participation.objects.get(external_id="pid-out")
    play(out, django_capture_on_commit_callbacks)
    Participation.objects.filter(pk=out.pk).update(screened_out_at=timezone.now(), screen_out_reason="screening")

    researcher = get_user_model().objects.create_user("designer", password="pw")
    researcher.groups.add(Group.objects.get_or_create(name="researchers")[0])
    StudyMembership.objects.create(study=study, user=researcher, role="researcher")
    web = Client()
    web.force_login(researcher)
    assert web.post(f"/study/{study.slug}/preview/").url == f"/study/{study.slug}/"
    preview = Participation.objects.get(study=study, annotator=researcher)
    assert preview.source == "preview"
    web.post(f"/study/{study.slug}/screening/", {"answer": "Yes"})
    play(preview, django_capture_on_commit_callbacks)

    rows = comparison_rows(study=study, with_scores=False)
    kept = {p.code: p.external_id for p in Participation.objects.filter(external_id="pid-one")}
    assert {r["annotator"] for r in rows} == set(kept)
    assert {(r["annotator"], r["annotator_external"]) for r in rows} == {
        (code, expected_pseudonym(study, pid)) for code, pid in kept.items()
    }
    assert rows and not any("pid-one" in str(r) for r in rows)
    assert {p.code for p in study_progress(study=study)} == {*kept, out.code}  # no preview
    # The research study list counts participants as the dashboard does: no preview, no screen-out.
    (listed,) = web.get("/research/").context["studies"]
    assert (listed.n_participants, listed.n_completed) == (1, 0)

    # A finished preview, answers and all, gives way to a fresh one.
    participation_finish(participation=preview)
    assert web.post(f"/study/{study.slug}/preview/").status_code == 302
    fresh = Participation.objects.get(study=study, annotator=researcher)
    assert fresh.pk != preview.pk and not Participation.objects.filter(pk=preview.pk).exists()


def test_only_owners_and_researchers_preview_and_a_finished_preview_starts_afresh(django_capture_on_commit_callbacks):
    study = crowd_study()
    viewer = get_user_model().objects.create_user("viewer", password="pw")
    StudyMembership.objects.create(study=study, user=viewer, role="viewer")
    client = Client()
    client.force_login(viewer)
    assert client.get(f"/study/{study.slug}/preview/").status_code == 404
    assert client.post(f"/study/{study.slug}/preview/").status_code == 404

    StudyMembership.objects.filter(user=viewer).update(role="researcher")
    page = client.get(f"/study/{study.slug}/preview/")
    assert page.status_code == 200 and "never reaches the analysis" in page.text
    client.post(f"/study/{study.slug}/preview/")
    first = Participation.objects.get(study=study, annotator=viewer)
    client.post(f"/study/{study.slug}/profile/", PERSONA)
    ask = client.get(f"/study/{study.slug}/ask/").text
    assert "Preview: your answers are never analysed" in ask and "/resume/" not in ask
    assert client.get(f"/resume/{first.resume_token}/").status_code == 403  # a researcher's account
    client.post(f"/study/{study.slug}/preview/")
    assert Participation.objects.get(study=study, annotator=viewer).pk == first.pk  # resumed
    participation_finish(participation=first)
    client.post(f"/study/{study.slug}/preview/")
    assert Participation.objects.get(study=study, annotator=viewer).pk != first.pk


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("completion_url", "http://prolific.example/done", "must be an https:// address"),
        ("screen_out_url", "ftp://prolific.example/return", "must be an https:// address"),
        ("participant_cap", 0, "at least 1"),
        ("open_link_expires_at", "2020-01-01T00:00:00Z", "must be in the future"),
        ("external_id_param", "worker id", "URL parameter name"),
        ("crowd_completion_code", "C<1>", "letters, digits"),
        ("screening_accepted", ["Maybe"], "one or more of the choices"),
    ],
)
def test_the_admin_api_refuses_bad_crowd_settings_with_a_field_message(field, value, message):
    study = StudyFactory()
    body = {"screening_question": "Adult?", "screening_choices": ["Yes", "No"], "screening_accepted": ["Yes"]}
    response = owner_api().patch(f"/api/v1/admin/studies/{study.slug}/", {**body, field: value}, format="json")
    assert response.status_code == 400, response.content
    assert message in str(response.json()["extra"]["fields"][field]), response.json()
    study.refresh_from_db()
    assert study.screening_question == ""  # nothing saved


def test_the_admin_api_sets_the_open_link_and_says_what_to_paste_in_prolific():
    study = StudyFactory()
    api = owner_api()
    body = {
        "open_link_enabled": True,
        "participant_cap": 50,
        "open_link_expires_at": (timezone.now() + timedelta(days=7)).isoformat(),
        "completion_url": "http://localhost:8000/done",
    }
    response = api.patch(f"/api/v1/admin/studies/{study.slug}/", body, format="json")
    assert response.status_code == 200, response.content
    study.refresh_from_db()
    link = api.get(f"/api/v1/admin/studies/{study.slug}/open-link/").json()
    assert link["link"].endswith(f"/open/{study.open_link_token}/") and len(study.open_link_token) >= 32
    assert link["prolific_link"].endswith(
        "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    )
    assert (link["participant_cap"], link["participants"], link["enabled"]) == (50, 0, True)
    # Saving again with the same (now stored) expiry is not refused; the token survives disabling.
    token = study.open_link_token
    again = api.patch(f"/api/v1/admin/studies/{study.slug}/", {"open_link_enabled": False}, format="json")
    assert again.status_code == 200
    study.refresh_from_db()
    assert study.open_link_token == token


def test_open_and_resume_tokens_and_platform_ids_never_reach_a_log():
    request_line = "GET /open/SeCrEt1/?PROLIFIC_PID=5f3a9&STUDY_ID=s1&SESSION_ID=e1 HTTP/1.1"
    args = (request_line, 302, "https://x.example/resume/SeCrEt2/")
    record = logging.LogRecord("django.server", logging.INFO, __file__, 1, '"%s" %s referer %s', args, None)
    RedactTokensFilter().filter(record)
    line = record.getMessage()
    assert not any(secret in line for secret in ("SeCrEt1", "SeCrEt2", "5f3a9", "=s1", "=e1")), line
    assert "/open/[redacted]/?PROLIFIC_PID=[redacted]" in line and "/resume/[redacted]/" in line


def arrive_together(study: Study, pids: list[str]) -> dict[int, object]:
    """One open-link join per platform id, released together by a barrier: each slot's result or error."""
    barrier = threading.Barrier(len(pids))
    results: dict[int, object] = {}

    def arrive_now(slot: int, pid: str) -> None:
        try:
            barrier.wait()
            results[slot] = open_link_join(
                token=study.open_link_token, annotator=None, consent=True, external=ExternalIds(participant=pid)
            )
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            results[slot] = error
        finally:
            connection.close()

    threads = [threading.Thread(target=arrive_now, args=(slot, pid)) for slot, pid in enumerate(pids)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(results) == len(pids), results
    return results


@pytest.mark.timeout(60)
def test_arrivals_at_the_same_moment_keep_one_participation_per_id_and_the_cap(transactional_db: None) -> None:
    """Four arrivals released together by a barrier: the same PROLIFIC_PID twice, and two others racing for
    the one place the cap of 2 leaves."""
    study = crowd_study(participant_cap=2)
    results = arrive_together(study, ["same", "same", "other-1", "other-2"])
    refused = [slot for slot, r in results.items() if isinstance(r, ApplicationError)]
    assert all(results[slot].status == 403 for slot in refused), results  # type: ignore[attr-defined]
    # Whichever arrive first take the two places: the cap holds, and no id has two participations.
    assert Participation.objects.filter(study=study).count() == 2
    assert Participation.objects.filter(study=study, external_id="same").count() <= 1
    # The same id's two arrivals get the same answer: both the one participation, or both the refusal.
    if 0 in refused or 1 in refused:
        assert sorted(refused) == [0, 1], results
    else:
        assert results[0][0].pk == results[1][0].pk and len(refused) == 1, results  # type: ignore[index]


@pytest.mark.timeout(60)
def test_arrivals_at_the_same_moment_in_a_study_without_a_cap_each_join_and_one_id_gets_one_participation(
    transactional_db: None,
) -> None:
    study = crowd_study()
    results = arrive_together(study, ["same", "same", "same", "other-1", "other-2", "other-3"])
    assert all(isinstance(r, tuple) for r in results.values()), results
    assert Participation.objects.filter(study=study).count() == 4
    same = {results[slot][0].pk for slot in (0, 1, 2)}  # type: ignore[index]
    assert same == {Participation.objects.get(study=study, external_id="same").pk}
    assert sorted(results[slot][1] for slot in (0, 1, 2)) == [False, False, True]  # type: ignore[index]


class _HeldJoin:
    """A join whose transaction stays open, holding whatever it locked, until `release()`."""

    def __init__(self, join) -> None:  # type: ignore[no-untyped-def]
        self.joined = threading.Event()
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(join,))

    def _run(self, join) -> None:  # type: ignore[no-untyped-def]
        from django.db import transaction

        try:
            with transaction.atomic():
                join()
                self.joined.set()
                self.done.wait(30)
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            self.error = error
            self.joined.set()
        finally:
            connection.close()

    def __enter__(self) -> _HeldJoin:
        self.thread.start()
        assert self.joined.wait(30) and self.error is None, self.error
        return self

    def release(self) -> None:
        self.done.set()
        self.thread.join(30)

    def __exit__(self, *exc: object) -> None:
        self.release()


def _in_thread(call):  # type: ignore[no-untyped-def]
    """Run `call` in its own thread and connection; the thread and the dict its result or error lands in."""
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["result"] = call()
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            out["error"] = error
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


@pytest.mark.timeout(60)
def test_an_arrival_does_not_wait_for_another_arrivals_unfinished_join_and_the_same_id_resumes_it(
    transactional_db: None,
) -> None:
    """A crowd launch: one arrival's join is still in its transaction (a slow commit, a slow page) while others
    arrive. A different id joins at once; the same id waits for that join and then resumes it."""
    study = crowd_study()

    def join(pid: str):  # type: ignore[no-untyped-def]
        return lambda: open_link_join(
            token=study.open_link_token, annotator=None, consent=True, external=ExternalIds(participant=pid)
        )

    with _HeldJoin(join("first")) as held:
        other, other_out = _in_thread(join("second"))
        other.join(5)
        assert not other.is_alive(), "a different platform id waited for another arrival's join"
        assert "result" in other_out, other_out
        again, again_out = _in_thread(join("first"))
        again.join(1)
        assert again.is_alive(), "the same id did not wait for its first arrival's join to commit"
        held.release()
        again.join(30)
    assert "result" in again_out, again_out
    participation, created = again_out["result"]  # type: ignore[misc]
    assert not created and participation == Participation.objects.get(study=study, external_id="first")
    assert Participation.objects.filter(study=study).count() == 2


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("first_account", "trusted", "expected"),
    [("participant", False, 403), ("participant", True, 302), ("password", True, 403)],
)
def test_a_browser_racing_the_same_id_through_the_page_is_signed_in_only_where_the_id_alone_may_resume(
    transactional_db: None, first_account: str, trusted: bool, expected: int
) -> None:
    """Two browsers consent with the same PROLIFIC_PID at the same moment; the second's join waits for the
    first's and finds its participation. As on any later arrival, the second browser is signed in as that
    participation's account only in a study that trusts the platform id alone, and only into a participant's
    passwordless account (never a researcher's); otherwise it is refused and signed in as no one."""
    study = crowd_study(trust_platform_id=trusted)
    holder = None if first_account == "participant" else get_user_model().objects.create_user("res", password="pw")

    def first():  # type: ignore[no-untyped-def]
        return open_link_join(
            token=study.open_link_token, annotator=holder, consent=True, external=ExternalIds(participant="twice")
        )

    browser = Client()
    with _HeldJoin(first) as held:
        racing, out = _in_thread(lambda: consent(browser, study, "twice"))
        racing.join(1)
        assert racing.is_alive(), "the racing browser did not wait for the first join"
        held.release()
        racing.join(30)
    assert "result" in out, out
    participation = Participation.objects.get(study=study, external_id="twice")
    signed_in = browser.session.get("_auth_user_id")
    assert out["result"].status_code == expected  # type: ignore[attr-defined]
    assert signed_in == (str(participation.annotator_id) if expected == 302 else None)
    if not trusted:
        assert "already been used to start this study" in out["result"].content.decode()  # type: ignore[attr-defined]
    assert Participation.objects.filter(study=study).count() == 1


@pytest.mark.timeout(60)
def test_an_invitation_join_does_not_wait_for_an_arrival_holding_a_capped_studys_place(
    transactional_db: None,
) -> None:
    """A capped study queues its open-link arrivals on its row; an invitation's participant joining the same
    study meanwhile is not queued behind them."""
    from annotation.services.participation import invitation_join
    from studies.services.invitation import invitation_create_bulk

    study = crowd_study(participant_cap=10)
    invitation = invitation_create_bulk(study=study, count=1)[0]
    arrival = lambda: open_link_join(  # noqa: E731
        token=study.open_link_token, annotator=None, consent=True, external=ExternalIds(participant="crowd-1")
    )
    with _HeldJoin(arrival):
        invited, out = _in_thread(lambda: invitation_join(token=invitation.token, annotator=None, consent=True))
        invited.join(5)
        assert not invited.is_alive(), "the invitation's join waited for an open-link arrival's lock on the study"
    invited.join(30)
    assert "result" in out, out
    assert Participation.objects.filter(study=study).count() == 2


def test_an_arrival_whose_sign_in_fails_takes_no_place_and_the_next_arrival_joins(transactional_db: None) -> None:
    from tests.annotation.test_invitation_races import inserts_refused

    study = crowd_study(participant_cap=1)
    with inserts_refused("django_session"):
        assert consent(Client(raise_request_exception=False), study, "unlucky").status_code == 500
    assert not Participation.objects.filter(study=study).exists()
    client = Client()
    arrive(study, "next", client)
    joined = consent(client, study, "next")
    assert joined.status_code == 302 and joined["Location"] == f"/study/{study.slug}/"
    assert list(Participation.objects.filter(study=study).values_list("external_id", flat=True)) == ["next"]


def test_the_admin_shows_the_open_link_to_paste_and_each_participants_resume_link():
    study = crowd_study()
    client, _ = arrive(study, "admin-view")
    consent(client, study, "admin-view")
    participation = Participation.objects.get(external_id="admin-view")
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("boss", "boss@example.org", "pw"))
    page = admin.get(f"/admin/studies/study/{study.pk}/change/").content.decode().replace("&amp;", "&")
    assert f"/open/{study.open_link_token}/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}&STUDY_ID=" in page
    listed = admin.get("/admin/studies/study/").content.decode()
    assert f"/study/{study.slug}/preview/" in listed
    detail = admin.get(f"/admin/annotation/participation/{participation.pk}/change/").content.decode()
    assert f"/resume/{participation.resume_token}/" in detail and "admin-view" in detail


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_two_devices_answering_the_screening_question_at_once_record_one_answer():
    """The phone says Yes and the laptop says No at the same moment (POST .../screening/ twice): one answer is
    recorded and its device told so; the other gets the 409, and the participation is screened out exactly
    when the recorded answer is the refused one, never a mixture of the two."""
    study = crowd_study(**SCREENING, screening_accepted=["Yes"])
    for round_number in range(6):
        invitation = invitation_create_bulk(study=study, count=1)[0]
        accepted = APIClient().post(f"/api/v1/invitations/{invitation.token}/accept/", {"consent": True}, format="json")
        body = accepted.json()
        url = f"/api/v1/participations/{body['id']}/screening/"
        barrier = threading.Barrier(2)
        answers: dict[str, object] = {}

        def answer(choice: str, token: str = body["token"], url: str = url, barrier=barrier, answers=answers) -> None:
            api = APIClient()
            api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
            try:
                barrier.wait()
                answers[choice] = api.post(url, {"answer": choice}, format="json")
            except BaseException as error:  # noqa: BLE001 - reported by the main thread
                answers[choice] = error
            finally:
                connection.close()

        threads = [threading.Thread(target=answer, args=(choice,)) for choice in ("Yes", "No")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        statuses = {choice: getattr(r, "status_code", r) for choice, r in answers.items()}
        assert sorted(statuses.values(), key=str) == [200, 409], (round_number, statuses)
        recorded = next(choice for choice, status in statuses.items() if status == 200)
        participation = Participation.objects.get(pk=body["id"])
        assert participation.screening_answer == recorded, round_number
        assert (participation.screened_out_at is not None) == (recorded == "No"), round_number
        assert answers[recorded].json()["screening_answer"] == recorded  # type: ignore[union-attr]
