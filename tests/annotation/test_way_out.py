"""The annotator can always get out: a question stuck with no worker shows what is happening past the
deadline and offers try again, set aside and stop; stopping has a confirmation step and ends with a
completion code once the study's minimum is ranked (else with the stop recorded and a reference); stale tabs and out-of-turn answers are told what was recorded; time on page is stored."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Judgment, Match, Participation, Query
from studies.services.invitation import invitation_create_bulk
from studies.services.study import study_set_status
from tests.annotation.factories import PERSONA, StudyFactory

pytestmark = pytest.mark.django_db

QUESTION = "How does night shift work affect nurses' sleep?"


@pytest.fixture
def study():
    return StudyFactory(slug="sleep")


def url(name: str, *args: object) -> str:
    return reverse(f"annotation:{name}", args=["sleep", *args])


def _annotator(study) -> Client:
    client = Client()
    invitation = invitation_create_bulk(study=study, count=1)[0]
    assert client.post(reverse("annotation:join", args=[invitation.token]), {"consent": "on"}).status_code == 302
    page = client.get(url("profile")).content.decode()
    shown = re.search(r'name="shown" value="([^"]+)"', page).group(1)
    assert client.post(url("profile"), {**PERSONA, "shown": shown}).status_code == 302
    return client


def _ask(client: Client, capture, *, run_worker: bool, index: int = 1) -> Query:
    """Ask a question; with run_worker=False no worker ever picks it up (as with none running)."""
    page = client.get(url("ask")).content.decode()
    token = re.search(r'name="client_token" value="([0-9a-f]+)"', page).group(1)
    shown = re.search(r'name="shown" value="([^"]+)"', page).group(1)
    with capture(execute=run_worker):
        response = client.post(url("ask"), {"text": QUESTION, "client_token": token, "shown": shown})
    assert response["Location"] == url("wait", index)
    return Query.objects.get(client_token=token)


def _overdue(query: Query) -> None:
    Query.objects.filter(pk=query.pk).update(created_at=query.created_at - timedelta(seconds=121))


def test_with_no_worker_the_waiting_page_offers_a_way_out_past_its_deadline(study, django_capture_on_commit_callbacks):
    client = _annotator(study)
    query = _ask(client, django_capture_on_commit_callbacks, run_worker=False)

    before = client.get(url("wait", 1)).content.decode()
    assert "Searching for relevant paper abstracts…" in before
    assert re.search(r'id="overdue" class="failure" hidden', before)
    assert 'href="/study/sleep/stop/"' in before  # stopping is offered all along

    _overdue(query)
    after = client.get(url("wait", 1)).content.decode()
    assert "The search for sources has taken more than 2 minutes, much longer than usual" in after
    assert not re.search(r'id="overdue" class="failure" hidden', after)
    assert "Set this question aside" in after and "Try again" in after
    status = client.get(url("status", 1)).json()
    assert status["overdue"] is True and "more than 2 minutes" in status["message"]

    # Try again sends the search to the queue again and comes back to the waiting page.
    with django_capture_on_commit_callbacks() as resent:
        assert client.post(url("retry", 1))["Location"] == url("wait", 1)
    assert len(resent) == 1

    # Set aside: back to asking, and the question does not count.
    assert client.post(url("discard", 1))["Location"] == url("study")
    query.refresh_from_db()
    assert (query.status, query.set_aside_reason) == (Query.Status.DISCARDED, "too_slow")
    assert query.set_aside_at is not None
    assert client.get(url("study"))["Location"] == url("ask")
    assert "Question 1 of 8" in client.get(url("ask")).content.decode()


def test_every_page_numbers_questions_the_same_way_after_one_is_set_aside(study, django_capture_on_commit_callbacks):
    study.queries_per_annotator = 2
    study.save(update_fields=["queries_per_annotator"])
    client = _annotator(study)
    _ask(client, django_capture_on_commit_callbacks, run_worker=False)
    assert "Question 1 of 2" in client.get(url("wait", 1)).content.decode()
    client.post(url("discard", 1))  # set aside: it does not count, so the next question is question 1 again
    for number in (1, 2):
        assert f"Question {number} of 2" in client.get(url("ask")).content.decode()
        query = _ask(client, django_capture_on_commit_callbacks, run_worker=False, index=number + 1)
        assert f"Question {number} of 2" in client.get(url("wait", query.index)).content.decode()
        with django_capture_on_commit_callbacks(execute=True) as sent:
            client.post(url("retry", query.index))
        assert sent and f"Question {number} of 2" in client.get(url("compare", query.index)).content.decode()
        _rank_current(client)
    assert client.get(url("study"))["Location"] == url("done")


def test_stopping_before_ranking_enough_asks_first_then_records_the_stop_without_a_code(
    study, django_capture_on_commit_callbacks
):
    client = _annotator(study)
    query = _ask(client, django_capture_on_commit_callbacks, run_worker=False)  # stuck in retrieving

    confirm = client.get(url("stop")).content.decode()
    assert "Stop the study?" in confirm and QUESTION[:30] in confirm
    assert "is set aside and does not count" in confirm
    assert 'action="/study/sleep/finish/"' in confirm and "No, continue the study" in confirm
    # Before confirming, the annotator is told there will be no code and given the reference to quote.
    participation = Participation.objects.get()
    assert "you get no completion code" in confirm and "at least 1 question compared" in confirm
    assert participation.code in confirm and "Yes, stop without a code" in confirm
    assert participation.completed_at is None and participation.stopped_at is None  # the page changes nothing

    done = client.post(url("finish"), follow=True).content.decode()
    assert "You have stopped the study" in done and "There is no completion code" in done
    participation.refresh_from_db()
    assert participation.stopped_at is not None
    assert (participation.completed_at, participation.completion_code) == (None, "")
    assert participation.code in done and 'id="completion-code"' not in done
    query.refresh_from_db()
    assert (query.status, query.set_aside_reason) == (Query.Status.DISCARDED, "stopped")
    # Afterwards every page leads to that page, and a worker finishing the question changes nothing.
    assert client.get(url("wait", 1))["Location"] == url("study")
    assert client.get(url("study"))["Location"] == url("done")
    assert client.get(url("ask"))["Location"] == url("study")
    # Stopping again is harmless and still issues no code.
    assert client.post(url("finish"))["Location"] == url("done")
    participation.refresh_from_db()
    assert participation.completion_code == ""


def _rank_current(client: Client) -> None:
    """Answer every comparison of the question on screen (three in a bracket of four)."""
    index = Query.objects.latest("index").index
    for _ in range(3):
        page = client.get(url("compare", index)).content.decode()
        match_id = int(re.search(r'name="match_id" value="(\d+)"', page).group(1))
        client.post(url("compare", index), {"match_id": match_id, "choice": "left"})


def test_stopping_after_the_minimum_is_ranked_gives_the_code(study, django_capture_on_commit_callbacks):
    study.min_ranked_questions = 2
    study.save(update_fields=["min_ranked_questions"])
    client = _annotator(study)
    _ask(client, django_capture_on_commit_callbacks, run_worker=True)
    _rank_current(client)
    assert Query.objects.get().status == Query.Status.RANKED
    # One of two ranked: stopping now would give no code, and the page says so.
    confirm = client.get(url("stop")).content.decode()
    assert "at least 2 questions compared, and you have completed 1" in confirm
    page = client.get(url("ask")).content.decode()
    token = re.search(r'name="client_token" value="([0-9a-f]+)"', page).group(1)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(url("ask"), {"text": "Shift length and fatigue?", "client_token": token})
    _rank_current(client)
    assert "Yes, stop and get my code" in client.get(url("stop")).content.decode()
    done = client.post(url("finish"), follow=True).content.decode()
    participation = Participation.objects.get()
    assert participation.completion_code and participation.completion_code in done
    assert "You ranked summaries for 2 questions" in done and participation.stopped_at is None


def test_stopping_from_the_comparison_page_keeps_the_answers_given(study, django_capture_on_commit_callbacks):
    client = _annotator(study)
    query = _ask(client, django_capture_on_commit_callbacks, run_worker=True)
    page = client.get(url("compare", 1)).content.decode()
    assert 'href="/study/sleep/stop/"' in page
    match_id = int(re.search(r'name="match_id" value="(\d+)"', page).group(1))
    client.post(url("compare", 1), {"match_id": match_id, "choice": "left"})
    assert "Stop the study?" in client.get(url("stop")).content.decode()
    assert client.post(url("finish"))["Location"] == url("done")
    query.refresh_from_db()
    assert (query.status, query.set_aside_reason) == (Query.Status.DISCARDED, "stopped")
    assert Judgment.objects.get().match_id == match_id


@pytest.mark.parametrize("state", ["closed", "paused"])
def test_a_study_closed_or_paused_mid_question_says_so_with_the_reference_on_every_page(
    study, state, django_capture_on_commit_callbacks
):
    study.min_ranked_questions = 2
    study.save(update_fields=["min_ranked_questions"])
    client = _annotator(study)
    _ask(client, django_capture_on_commit_callbacks, run_worker=True)
    _rank_current(client)
    page = client.get(url("ask")).content.decode()
    token = re.search(r'name="client_token" value="([0-9a-f]+)"', page).group(1)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(url("ask"), {"text": "Shift length and fatigue?", "client_token": token})
    page = client.get(url("compare", 2)).content.decode()
    match_id = int(re.search(r'name="match_id" value="(\d+)"', page).group(1))
    study_set_status(study=study, status=state)  # the researcher, while the annotator reads the comparison

    participation = Participation.objects.get()
    answered = client.post(url("compare", 2), {"match_id": match_id, "choice": "left"})
    pages = [answered, client.get(url("compare", 2)), client.get(url("study")), client.get(url("ask"))]
    pages += [client.get(url("stop")), client.post(url("finish"))]
    for response in pages:
        text = response.content.decode()
        assert response.status_code in (403, 409) and f"This study is {state}" in text
        assert participation.code in text  # the reference to give the research team
        assert "you compared the summaries of 1 question." in text
        assert "Shift length and fatigue?" in text  # the question they were on, and what became of it
        if state == "closed":
            assert "no completion code can be issued" in text and "was not finished" in text
            assert 'href="/study/sleep/' not in text  # no link that only leads back to this page
        else:
            assert "is kept, with the comparisons you answered" in text and 'href="/study/sleep/"' in text
    assert not Judgment.objects.filter(match_id=match_id).exists()
    participation.refresh_from_db()
    assert (participation.completed_at, participation.stopped_at, participation.completion_code) == (None, None, "")


def test_a_finished_annotator_of_a_closed_study_keeps_their_completion_code(study, django_capture_on_commit_callbacks):
    client = _annotator(study)
    _ask(client, django_capture_on_commit_callbacks, run_worker=True)
    _rank_current(client)
    client.post(url("finish"))
    study_set_status(study=study, status="closed")
    code = Participation.objects.get().completion_code
    assert client.get(url("ask"))["Location"] == url("done")
    assert client.get(url("compare", 1))["Location"] == url("done")
    assert code and code in client.get(url("done")).content.decode()


def test_a_stale_tab_is_told_the_match_was_already_answered_and_how(study, django_capture_on_commit_callbacks):
    client = _annotator(study)
    _ask(client, django_capture_on_commit_callbacks, run_worker=True)
    page = client.get(url("compare", 1)).content.decode()
    first = int(re.search(r'name="match_id" value="(\d+)"', page).group(1))
    assert client.post(url("compare", 1), {"match_id": first, "choice": "left"})["Location"] == url("study")

    # The other tab still shows the first match and answers it differently.
    stale = client.post(url("compare", 1), {"match_id": first, "choice": "neither"})
    assert stale.status_code == 409
    text = stale.content.decode()
    assert "Your answer was not recorded" in text
    assert "already answered, with the left summary" in text
    assert Judgment.objects.get(match_id=first).choice == "left"
    second = Match.objects.get(bracket__query__index=1, round=1, index=1)
    assert not Judgment.objects.filter(match=second).exists()  # never applied to the current match

    # The same answer again (a double click) is harmless and moves on.
    assert client.post(url("compare", 1), {"match_id": first, "choice": "left"})["Location"] == url("study")


def test_an_answer_naming_another_match_than_the_one_on_screen_is_refused(study, django_capture_on_commit_callbacks):
    client = _annotator(study)
    _ask(client, django_capture_on_commit_callbacks, run_worker=True)
    client.get(url("compare", 1))
    later = Match.objects.get(bracket__query__index=1, round=1, index=1)
    response = client.post(url("compare", 1), {"match_id": later.pk, "choice": "right"})
    assert response.status_code == 409
    assert "not the one to answer now" in response.content.decode()
    assert not Judgment.objects.exists()


def test_time_on_every_page_of_the_journey_is_stored(study, django_capture_on_commit_callbacks):
    client = _annotator(study)
    query = _ask(client, django_capture_on_commit_callbacks, run_worker=True)
    persona = Participation.objects.get().personas.get()
    assert persona.form_shown_at is not None and persona.form_shown_at <= persona.created_at
    query.refresh_from_db()
    assert query.shown_at is not None and query.shown_at <= query.created_at  # the question page
    client.get(url("wait", 1))  # already ready: it sends the annotator on
    Query.objects.filter(pk=query.pk).update(status=Query.Status.GENERATING)
    client.get(url("wait", 1))
    query.refresh_from_db()
    assert query.wait_shown_at is not None and query.wait_shown_at >= query.created_at
    Query.objects.filter(pk=query.pk).update(status=Query.Status.READY)
    client.get(url("compare", 1))
    assert Match.objects.filter(shown_at__isnull=False).count() == 1


def test_a_forged_shown_field_is_ignored(study, django_capture_on_commit_callbacks):
    client = _annotator(study)
    page = client.get(url("ask")).content.decode()
    token = re.search(r'name="client_token" value="([0-9a-f]+)"', page).group(1)
    with django_capture_on_commit_callbacks():
        client.post(url("ask"), {"text": QUESTION, "client_token": token, "shown": "1000000000.0"})
    assert Query.objects.get().shown_at is None


# --- the API -------------------------------------------------------------------------------------


def _api_annotator(study) -> tuple[APIClient, dict]:
    invitation = invitation_create_bulk(study=study, count=1)[0]
    body = APIClient().post(f"/api/v1/invitations/{invitation.token}/accept/", {"consent": True}, format="json").json()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {body['token']}")
    client.put(f"/api/v1/participations/{body['id']}/persona/", PERSONA, format="json")
    return client, body


def test_api_stuck_question_can_be_set_aside_or_stopped(study, django_capture_on_commit_callbacks):
    client, me = _api_annotator(study)
    with django_capture_on_commit_callbacks():  # no worker
        created = client.post(f"/api/v1/participations/{me['id']}/queries/", {"text": QUESTION}, format="json")
    assert created.status_code == 201
    qid = created.json()["id"]
    assert created.json()["message"] == "Searching for relevant paper abstracts…"
    _overdue(Query.objects.get(pk=qid))
    body = client.get(f"/api/v1/queries/{qid}/").json()
    assert body["overdue"] is True and "more than 2 minutes" in body["message"]
    discarded = client.post(f"/api/v1/queries/{qid}/discard/")
    assert discarded.status_code == 200 and discarded.json()["set_aside_reason"] == "too_slow"

    with django_capture_on_commit_callbacks():
        client.post(f"/api/v1/participations/{me['id']}/queries/", {"text": QUESTION + " again"}, format="json")
    finished = client.post(f"/api/v1/participations/{me['id']}/finish/")
    # Nothing ranked: the stop is recorded, with no completion code.
    assert finished.status_code == 200 and finished.json()["completion_code"] == ""
    assert finished.json()["stopped_at"] and finished.json()["completed_at"] is None
    assert set(Query.objects.values_list("set_aside_reason", flat=True)) == {"too_slow", "stopped"}


def test_api_stale_and_misnamed_answers_are_409_with_what_was_recorded(study, django_capture_on_commit_callbacks):
    client, me = _api_annotator(study)
    with django_capture_on_commit_callbacks(execute=True):
        qid = client.post(f"/api/v1/participations/{me['id']}/queries/", {"text": QUESTION}, format="json").json()["id"]
    first, second = Match.objects.filter(bracket__query_id=qid).order_by("index")

    misnamed = client.post(f"/api/v1/matches/{first.pk}/choice/", {"choice": "left", "match": second.pk}, format="json")
    assert misnamed.status_code == 409 and not Judgment.objects.exists()

    # The two first-round matches are independent: a client may answer the second one first.
    second_first = client.post(f"/api/v1/matches/{second.pk}/choice/", {"choice": "left"}, format="json")
    assert second_first.status_code == 200 and Judgment.objects.get().match_id == second.pk
    answer = {"choice": "right", "match": first.pk}
    assert client.post(f"/api/v1/matches/{first.pk}/choice/", answer, format="json").status_code == 200
    again = client.post(f"/api/v1/matches/{first.pk}/choice/", {"choice": "right"}, format="json")
    assert again.status_code == 200  # a resend is harmless
    stale = client.post(f"/api/v1/matches/{first.pk}/choice/", {"choice": "left"}, format="json")
    assert stale.status_code == 409
    assert stale.json()["extra"] == {"match": first.pk, "recorded_choice": "right"}
    assert Judgment.objects.get(match=first).choice == "right"


def test_api_fetching_a_match_records_when_it_was_shown(study, django_capture_on_commit_callbacks):
    client, me = _api_annotator(study)
    with django_capture_on_commit_callbacks(execute=True):
        qid = client.post(f"/api/v1/participations/{me['id']}/queries/", {"text": QUESTION}, format="json").json()["id"]
    first = Match.objects.filter(bracket__query_id=qid).order_by("index").first()
    fetched = client.get(f"/api/v1/matches/{first.pk}/").json()
    assert fetched["shown_at"] is not None
    Match.objects.filter(pk=first.pk).update(shown_at=first.created_at - timedelta(seconds=5))
    assert client.get(f"/api/v1/matches/{first.pk}/").status_code == 200  # a second fetch keeps the first time
    judgment = client.post(f"/api/v1/matches/{first.pk}/choice/", {"choice": "left"}, format="json").json()
    assert judgment["seconds_on_page"] >= 5


def test_a_question_set_aside_while_generating_costs_no_more_model_calls(study, django_capture_on_commit_callbacks):
    client = _annotator(study)
    query = _ask(client, django_capture_on_commit_callbacks, run_worker=False)
    # The search ran; the four summaries are queued behind a busy worker when the annotator gives up.
    with django_capture_on_commit_callbacks(execute=False):
        from annotation.services.query import query_retrieve

        query_retrieve(query_id=query.pk)
    _overdue(query)
    assert client.post(url("discard", 1))["Location"] == url("study")
    statuses = set(query.candidates.values_list("status", flat=True))
    assert statuses == {"failed"}
    assert set(query.candidates.values_list("failure_reason", flat=True)) == {
        "Not written: the annotator set the question aside."
    }
    # "Try again" on it (a stale waiting page) sends nothing and brings nothing back.
    with django_capture_on_commit_callbacks(execute=False) as sent:
        client.post(url("retry", 1))
    assert sent == []
    assert Query.objects.get(pk=query.pk).status == Query.Status.DISCARDED


def test_a_retrieval_that_failed_after_storing_its_sources_can_be_retried(study, django_capture_on_commit_callbacks):
    client = _annotator(study)
    query = _ask(client, django_capture_on_commit_callbacks, run_worker=False)
    with django_capture_on_commit_callbacks(execute=False):
        from annotation.services.query import query_retrieve

        query_retrieve(query_id=query.pk)
    # An error after the sources were stored (the candidates' insert failed): on_failure marks it failed.
    query.candidates.all().delete()
    Query.objects.filter(pk=query.pk).update(status=Query.Status.FAILED, failure_reason="Unexpected error (...)")
    with django_capture_on_commit_callbacks(execute=True):
        client.post(url("retry", 1))
    query.refresh_from_db()
    assert query.status == Query.Status.READY and query.candidates.count() == 4


def test_a_non_numeric_id_in_an_api_path_is_a_404(study):
    client, me = _api_annotator(study)
    for path in ("/api/v1/matches/abc/choice/", "/api/v1/queries/1x/"):
        assert client.post(path, {"choice": "left"}, format="json").status_code == 404, path
    # A NUL anywhere in a path is refused before routing, with a message (kernel.middleware).
    refused = client.post("/api/v1/participations/%00/finish/")
    assert refused.status_code == 400 and "NUL" in refused.json()["message"]


def test_try_again_restarts_the_waiting_clock_and_a_failed_search_is_named_as_such(
    study, django_capture_on_commit_callbacks
):
    client, me = _api_annotator(study)
    with django_capture_on_commit_callbacks():  # no worker
        qid = client.post(f"/api/v1/participations/{me['id']}/queries/", {"text": QUESTION}, format="json").json()["id"]
    _overdue(Query.objects.get(pk=qid))
    assert client.get(f"/api/v1/queries/{qid}/").json()["overdue"] is True
    with django_capture_on_commit_callbacks():
        assert client.post(f"/api/v1/queries/{qid}/retry/").status_code == 200
    assert client.get(f"/api/v1/queries/{qid}/").json()["overdue"] is False

    Query.objects.filter(pk=qid).update(status=Query.Status.FAILED, failure_reason="No sources were found.")
    body = client.get(f"/api/v1/queries/{qid}/").json()
    assert body["message"] == "Something went wrong: the search for sources did not succeed."
