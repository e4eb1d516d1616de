"""What opens a crowd participant's participation in another browser (docs/crowd.md, "Coming back"): never
the platform id alone (unless the study trusts it), the resume link only while the participation goes on, and
a replaced resume link never again. "Nothing of the participant's" is checked on the page a refused browser
gets and on the study's pages and API it tries next: no persona, question, answer, reference or code."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from annotation.models import Participation
from annotation.selectors.tournament import match_current
from annotation.services.participation import participation_finish, participation_screen_out
from annotation.services.quality import participation_stop_by_checks
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record
from studies.models import Study
from studies.services.study import study_set_status, study_update
from tests.annotation.factories import StudyFactory

pytestmark = pytest.mark.django_db

# The participant's own words: none may reach a browser that is not theirs.
PERSONA = {
    "role": "Zanzibar ferry pilot",
    "domain": "tidal navigation",
    "expertise": "expert",
    "research_area": "harbour silt",
    "use_case": "planning Quokkaville crossings at dawn",
}
QUESTION = "Do barnacle counts predict hull drag on Quokkaville ferries?"


def crowd_study(**extra):  # type: ignore[no-untyped-def]
    return StudyFactory(open_link_enabled=True, queries_per_annotator=2, **extra)


def arrive(study: Study, pid: str, client: Client | None = None):  # type: ignore[no-untyped-def]
    client = client or Client()
    return client, client.get(f"/open/{study.open_link_token}/", {"PROLIFIC_PID": pid, "STUDY_ID": "st-1"})


def joined(study: Study, pid: str) -> tuple[Client, Participation]:
    """A participant who arrived, agreed and described themselves, in their own browser."""
    client, _ = arrive(study, pid)
    assert client.post(f"/open/{study.open_link_token}/?PROLIFIC_PID={pid}", {"consent": "on"}).status_code == 302
    assert client.post(f"/study/{study.slug}/profile/", PERSONA).status_code == 302
    return client, Participation.objects.get(study=study, external_id=pid)


def rank_one_question(participation: Participation, captured) -> None:  # type: ignore[no-untyped-def]
    with captured(execute=True):
        query = query_submit(participation=participation, text=QUESTION, client_token="")
    while (match := match_current(query=query)) is not None:
        judgment_record(match=match, choice="left", by=participation)


def secrets_of(participation: Participation) -> list[str]:
    """What belongs to the participant and would show it was reached: their words, their reference, their code."""
    participation.refresh_from_db()
    found = [PERSONA["role"], PERSONA["domain"], PERSONA["use_case"], "Quokkaville", participation.code]
    found += [participation.resume_token]
    return found + ([participation.completion_code] if participation.completion_code else [])


def assert_gets_nothing(client: Client, study: Study, participation: Participation, *pages: str) -> None:
    """The browser is signed in as no one, and neither the given pages nor the study's nor the API show any of
    the participant's."""
    assert "_auth_user_id" not in client.session
    leaked = secrets_of(participation)
    for page in pages:
        assert not [s for s in leaked if s in page], page
    for path in (f"/study/{study.slug}/", f"/study/{study.slug}/ask/", f"/study/{study.slug}/done/"):
        answer = client.get(path)  # signed out: to the home page, which lists no study of theirs
        assert answer.status_code == 302 and answer.url.split("?")[0] == "/", (path, answer)
    assert client.get("/api/v1/participations/").status_code == 403


def test_an_open_link_id_replayed_from_another_browser_gets_the_already_started_page_and_nothing_else(
    django_capture_on_commit_callbacks,
):
    study = crowd_study()
    own, participation = joined(study, "5f0c1a2b3c4d")
    rank_one_question(participation, django_capture_on_commit_callbacks)

    # Going on: another browser with the open link and the id is told how to continue, and is given nothing.
    other, page = arrive(study, "5f0c1a2b3c4d")
    assert page.status_code == 403
    text = page.text
    assert "This participant id has already started this study" in text and "resume link" in text
    assert "contact the research team" in text
    refused = other.post(f"/open/{study.open_link_token}/?PROLIFIC_PID=5f0c1a2b3c4d", {"consent": "on"})
    assert refused.status_code == 403 and "already been used to start this study" in refused.text
    assert_gets_nothing(other, study, participation, text, refused.text)

    # Finished with a code: the same, and the code is not shown.
    assert own.post(f"/study/{study.slug}/finish/").status_code == 302
    participation.refresh_from_db()
    assert participation.completion_code
    other, page = arrive(study, "5f0c1a2b3c4d")
    assert page.status_code == 403
    assert_gets_nothing(other, study, participation, page.text)

    # The participant's own browser is still theirs: back through the link, it reaches its end page and code.
    _, back = arrive(study, "5f0c1a2b3c4d", own)
    assert back.status_code == 302
    assert participation.completion_code in own.get(f"/study/{study.slug}/done/").text
    assert Participation.objects.filter(study=study).count() == 1


def test_a_study_that_trusts_the_platform_id_lets_the_id_alone_continue_while_the_participation_goes_on(
    django_capture_on_commit_callbacks,
):
    study = crowd_study()
    own, participation = joined(study, "trusted-1")
    rank_one_question(participation, django_capture_on_commit_callbacks)
    assert arrive(study, "trusted-1")[1].status_code == 403  # off by default

    study_update(study=study, trust_platform_id=True)
    other, page = arrive(study, "trusted-1")
    assert page.status_code == 302 and page.url == f"/study/{study.slug}/"
    assert int(other.session["_auth_user_id"]) == participation.annotator_id
    ask = other.get(f"/study/{study.slug}/ask/")
    assert ask.status_code == 200 and "Question 2 of 2" in ask.text

    # Once it has ended, the id alone opens nothing (as the resume link), trusted or not.
    assert own.post(f"/study/{study.slug}/finish/").status_code == 302
    late, page = arrive(study, "trusted-1")
    assert page.status_code == 410 and "has ended, or the study is closed" in page.text
    assert_gets_nothing(late, study, participation, page.text)


def _completed(study, own, participation, captured):  # type: ignore[no-untyped-def]
    rank_one_question(participation, captured)
    own.post(f"/study/{study.slug}/finish/")


def _stopped(study, own, participation, captured):  # type: ignore[no-untyped-def]
    own.post(f"/study/{study.slug}/finish/")  # nothing ranked: stopped without a code


def _failed_screening(study, own, participation, captured):  # type: ignore[no-untyped-def]
    participation_screen_out(participation=participation, reason=Participation.ScreenOut.SCREENING)


def _stopped_by_checks(study, own, participation, captured):  # type: ignore[no-untyped-def]
    participation_stop_by_checks(participation=participation)


def _closed_without_code(study, own, participation, captured):  # type: ignore[no-untyped-def]
    study_set_status(study=study, status=Study.Status.CLOSED)


@pytest.mark.parametrize(
    "end", [_completed, _stopped, _failed_screening, _stopped_by_checks, _closed_without_code], ids=lambda f: f.__name__
)
def test_a_resume_link_used_after_the_participation_ended_gets_nothing(end, django_capture_on_commit_callbacks):
    study = crowd_study()
    own, participation = joined(study, "ender")
    link = f"/resume/{participation.resume_token}/"
    first = Client()
    assert first.get(link).status_code == 302  # it works while the participation goes on
    end(study, own, participation, django_capture_on_commit_callbacks)

    late = Client()
    page = late.get(link)
    assert page.status_code == 410 and "This resume link no longer works" in page.text
    assert_gets_nothing(late, study, participation, page.text)
    assert late.get(link).status_code == 410  # and again, however often
    # The pages and the API no longer show it.
    own_page = own.get(f"/study/{study.slug}/done/").text
    assert participation.resume_token not in own_page
    api = APIClient()
    api.force_authenticate(participation.annotator)
    assert api.get(f"/api/v1/participations/{participation.pk}/").json()["resume_url"] is None


def test_declining_consent_leaves_a_resume_link_that_opens_nothing():
    study = crowd_study()
    client, _ = arrive(study, "decliner")
    client.post(f"/open/{study.open_link_token}/?PROLIFIC_PID=decliner", {"decline": "1"})
    participation = Participation.objects.get(study=study, external_id="decliner")
    assert participation.screen_out_reason == Participation.ScreenOut.DECLINED_CONSENT
    late = Client()
    assert late.get(f"/resume/{participation.resume_token}/").status_code == 410
    assert "_auth_user_id" not in late.session


def test_a_closed_study_still_lets_an_annotator_who_earned_the_code_come_back_for_it(
    django_capture_on_commit_callbacks,
):
    study = crowd_study()
    _, participation = joined(study, "earner")
    rank_one_question(participation, django_capture_on_commit_callbacks)
    study_set_status(study=study, status=Study.Status.CLOSED)
    phone = Client()
    assert phone.get(f"/resume/{participation.resume_token}/").status_code == 302
    assert phone.post(f"/study/{study.slug}/finish/").status_code == 302
    participation.refresh_from_db()
    assert participation.completion_code in phone.get(f"/study/{study.slug}/done/").text
    # Taken: the link is spent.
    assert Client().get(f"/resume/{participation.resume_token}/").status_code == 410


def test_the_participants_own_browser_opening_its_link_after_the_end_is_at_its_end_page(
    django_capture_on_commit_callbacks,
):
    study = crowd_study()
    own, participation = joined(study, "own-end")
    link = f"/resume/{participation.resume_token}/"
    _completed(study, own, participation, django_capture_on_commit_callbacks)
    assert own.get(link).url == f"/study/{study.slug}/"
    participation.refresh_from_db()
    assert participation.completion_code in own.get(f"/study/{study.slug}/done/").text


def test_replacing_the_resume_link_kills_the_old_one_and_signs_out_other_browsers(
    django_capture_on_commit_callbacks,
):
    study = crowd_study()
    own, participation = joined(study, "replacer")
    old = f"/resume/{participation.resume_token}/"
    ask = own.get(f"/study/{study.slug}/ask/").text
    assert old in ask and "Replace my resume link" in ask
    borrowed = Client()  # someone the old link was shared with
    assert borrowed.get(old).status_code == 302
    assert borrowed.get(f"/study/{study.slug}/ask/").status_code == 200

    replaced = own.post(f"/study/{study.slug}/resume-link/", follow=True)
    assert replaced.status_code == 200 and "Your resume link has been replaced" in replaced.content.decode()
    participation.refresh_from_db()
    new = f"/resume/{participation.resume_token}/"
    assert new != old and new in replaced.content.decode() and old not in replaced.content.decode()
    # The participant's browser stays signed in; the one signed in by the old link is not any more.
    assert own.get(f"/study/{study.slug}/ask/").status_code == 200
    assert borrowed.get(f"/study/{study.slug}/ask/").status_code == 302
    assert_gets_nothing(borrowed, study, participation)
    # The old link opens nothing, now or later; the new one works.
    stranger = Client()
    page = stranger.get(old)
    assert page.status_code == 404 and "not valid" in page.text
    assert_gets_nothing(stranger, study, participation, page.text)
    phone = Client()
    assert phone.get(new).status_code == 302
    assert "Question 1 of 2" in phone.get(f"/study/{study.slug}/ask/").text

    # Through the API too: a new resume_url, the previous one dead.
    api = APIClient()
    api.force_authenticate(participation.annotator)
    body = api.post(f"/api/v1/participations/{participation.pk}/resume-link/").json()
    newer = body["resume_url"].removeprefix(settings.SITE_URL.rstrip("/"))
    assert newer not in (old, new)
    assert Client().get(new).status_code == 404 and Client().get(newer).status_code == 302
    assert own.get(f"/study/{study.slug}/ask/").status_code == 302  # another browser now: signed out too
    # Once the participation has ended there is no link to replace (410), and nothing changes.
    participation_finish(participation=participation)
    refused = api.post(f"/api/v1/participations/{participation.pk}/resume-link/")
    assert refused.status_code == 410
    assert Participation.objects.get(pk=participation.pk).resume_token == newer.split("/")[2]


def test_a_preview_has_no_resume_link_to_replace():
    study = crowd_study()
    researcher = get_user_model().objects.create_user("designer", password="pw")
    study.memberships.create(user=researcher, role="researcher")
    web = Client()
    web.force_login(researcher)
    web.post(f"/study/{study.slug}/preview/")
    preview = Participation.objects.get(study=study, annotator=researcher)
    token = preview.resume_token
    assert web.post(f"/study/{study.slug}/resume-link/").status_code == 403
    assert Participation.objects.get(pk=preview.pk).resume_token == token


def test_the_trust_setting_is_validated_and_shown_where_study_settings_are_edited():
    study = crowd_study()
    api = APIClient()
    api.force_authenticate(get_user_model().objects.create_superuser("root", "root@example.org", "pw"))
    url = f"/api/v1/admin/studies/{study.slug}/"
    assert api.get(url).json()["trust_platform_id"] is False
    for bad in ("maybe", 2, None):
        refused = api.patch(url, {"trust_platform_id": bad}, format="json")
        assert refused.status_code == 400 and "trust_platform_id" in refused.json()["extra"]["fields"], bad
    assert Study.objects.get(pk=study.pk).trust_platform_id is False
    assert api.patch(url, {"trust_platform_id": True}, format="json").json()["trust_platform_id"] is True
    assert Study.objects.get(pk=study.pk).trust_platform_id is True

    admin = Client()
    admin.force_login(get_user_model().objects.get(username="root"))
    page = admin.get(f"/admin/studies/study/{study.pk}/change/").content.decode()
    assert 'name="trust_platform_id"' in page and "Weaker" in page
