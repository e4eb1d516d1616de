"""The protocol through the service layer: query -> retrieval -> four candidates -> bracket -> matches."""

from __future__ import annotations

import contextlib

import pytest
from celery.exceptions import Retry
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from annotation.models import Candidate, Judgment, Match, Query
from annotation.selectors.generation import candidates_failed
from annotation.selectors.tournament import match_current
from annotation.services.generation import MAX_ATTEMPTS, candidate_retry
from annotation.services.participation import invitation_accept
from annotation.services.persona import persona_save
from annotation.services.query import query_resend, query_submit
from annotation.services.tournament import judgment_record
from annotation.tasks import generate_candidate
from kernel.exceptions import ApplicationError
from studies.models import Study
from studies.services.invitation import invitation_create_bulk
from studies.services.study import study_set_status
from tests.annotation.factories import StudyFactory, join, served_study, study_with_a_failing_system
from tests.support.openai_standin import openai_standin
from tests.support.openalex_standin import openalex_standin

pytestmark = pytest.mark.django_db


def ask(participation, text="How does night shift work affect nurses' sleep and patient safety?", token=""):
    return query_submit(participation=participation, text=text, client_token=token)


@pytest.fixture
def study():
    return StudyFactory()


def test_a_query_is_retrieved_generated_and_bracketed(study, django_capture_on_commit_callbacks):
    participation = join(study)
    with django_capture_on_commit_callbacks(execute=True):
        query = ask(participation)
    query.refresh_from_db()
    assert query.status == Query.Status.READY
    assert list(query.documents.values_list("rank", flat=True)) == list(range(1, 11))
    candidates = list(query.candidates.select_related("system"))
    assert len(candidates) == 4
    assert {c.status for c in candidates} == {Candidate.Status.DONE}
    assert sorted(c.position for c in candidates) == ["A", "B", "C", "D"]
    # Every candidate was generated from the same frozen context, persona only where the condition says so.
    for c in candidates:
        assert "[1] " in c.prompt and ("Role: practising nurse" in c.prompt) == (c.system.condition == "persona")
    matches = list(query.bracket.matches.order_by("index"))
    assert [m.label for m in matches] == ["round1_ab", "round1_cd"]
    by_position = {c.position: c.pk for c in candidates}
    assert {matches[0].left_id, matches[0].right_id} == {by_position["A"], by_position["B"]}
    assert {matches[1].left_id, matches[1].right_id} == {by_position["C"], by_position["D"]}


def _generated(study, django_capture_on_commit_callbacks, **kw):
    participation = join(study)
    with django_capture_on_commit_callbacks(execute=True):
        query = ask(participation, **kw)
    return participation, query


def test_winners_meet_in_the_final_and_the_query_is_ranked(study, django_capture_on_commit_callbacks):
    participation, query = _generated(study, django_capture_on_commit_callbacks)
    first = match_current(query=query)
    judgment_record(match=first, choice="left", by=participation)
    second = match_current(query=query)
    assert second.label == "round1_cd"
    judgment_record(match=second, choice="right", by=participation)
    final = match_current(query=query)
    assert final.label == "final"
    assert {final.left_id, final.right_id} == {first.left_id, second.right_id}
    judgment = judgment_record(match=final, choice="neither", by=participation)
    assert judgment.winner is None
    query.refresh_from_db()
    assert query.status == Query.Status.RANKED
    assert Judgment.objects.filter(match__bracket__query=query).count() == 3


def test_neither_in_round_one_skips_the_final(study, django_capture_on_commit_callbacks):
    participation, query = _generated(study, django_capture_on_commit_callbacks)
    judgment_record(match=match_current(query=query), choice="neither", by=participation)
    judgment_record(match=match_current(query=query), choice="left", by=participation)
    assert match_current(query=query) is None
    final = Match.objects.get(bracket__query=query, label="final")
    assert final.status == Match.Status.SKIPPED
    query.refresh_from_db()
    assert query.status == Query.Status.RANKED
    with pytest.raises(ApplicationError) as error:
        judgment_record(match=final, choice="left", by=participation)
    assert error.value.status == 409


def test_answers_are_idempotent_and_cannot_be_changed(study, django_capture_on_commit_callbacks):
    participation, query = _generated(study, django_capture_on_commit_callbacks)
    match = match_current(query=query)
    first = judgment_record(match=match, choice="left", by=participation)
    again = judgment_record(match=match, choice="left", by=participation)
    assert first.pk == again.pk
    with pytest.raises(ApplicationError) as error:
        judgment_record(match=match, choice="right", by=participation)
    assert error.value.status == 409
    assert Judgment.objects.filter(match=match).count() == 1
    assert Judgment.objects.get(match=match).choice == "left"


def test_someone_elses_match_is_not_found(study, django_capture_on_commit_callbacks):
    owner, query = _generated(study, django_capture_on_commit_callbacks)
    intruder = join(study)
    with pytest.raises(ApplicationError) as error:
        judgment_record(match=match_current(query=query), choice="left", by=intruder)
    assert error.value.status == 404
    assert not Judgment.objects.exists()


def test_resubmitted_query_form_creates_one_query(study, django_capture_on_commit_callbacks):
    participation = join(study)
    with django_capture_on_commit_callbacks(execute=True):
        a = ask(participation, token="tok-1")
        b = ask(participation, token="tok-1")
    assert a.pk == b.pk
    assert participation.queries.count() == 1


def test_a_new_question_under_a_spent_client_token_is_asked_not_dropped(study, django_capture_on_commit_callbacks):
    """The back button restores the question form with its old hidden token; a new question typed into it is a
    new question (sent twice from that form, still one), never the earlier one returned in its place."""
    participation, first = _generated(study, django_capture_on_commit_callbacks, token="tok-1")
    while (match := match_current(query=first)) is not None:
        judgment_record(match=match, choice="left", by=participation)
    with django_capture_on_commit_callbacks(execute=True):
        second = ask(participation, text="Which shift patterns reduce fatigue?", token="tok-1")
        again = ask(participation, text="  Which shift patterns reduce fatigue?", token="tok-1")
        first_again = ask(participation, token="tok-1")
    assert second.pk != first.pk and again.pk == second.pk and first_again.pk == first.pk
    assert list(participation.queries.order_by("index").values_list("index", "text")) == [
        (1, "How does night shift work affect nurses' sleep and patient safety?"),
        (2, "Which shift patterns reduce fatigue?"),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("   ", "Please write your question."),
        (" \u00a0\u3000 ", "Please write your question."),
        # Only invisible characters (zero-width space and joiner, byte-order mark, word joiner): no question.
        ("\u200b", "Please write your question."),
        ("\ufeff\u2060", "Please write your question."),
        ("\u200b \u200d", "Please write your question."),
        ("x" * 1001, "under 1000 characters"),
    ],
)
def test_bad_query_text_is_refused_with_a_field_message(study, text, message):
    participation = join(study)
    with pytest.raises(ApplicationError) as error:
        ask(participation, text=text)
    assert error.value.field == "text" and message in error.value.message
    assert not Query.objects.exists()


def test_query_limit_is_enforced(django_capture_on_commit_callbacks):
    study = StudyFactory(queries_per_annotator=1)
    participation, query = _generated(study, django_capture_on_commit_callbacks)
    for _ in range(2):
        match = match_current(query=query)
        judgment_record(match=match, choice="neither", by=participation)
    with pytest.raises(ApplicationError) as error:
        ask(participation, text="another question")
    assert "all 1 questions" in error.value.message
    assert participation.queries.count() == 1


def test_one_question_at_a_time(study, django_capture_on_commit_callbacks):
    participation, _ = _generated(study, django_capture_on_commit_callbacks)
    with pytest.raises(ApplicationError) as error:
        ask(participation, text="a second question before ranking the first")
    assert error.value.status == 409


def test_paused_study_refuses_new_queries(study):
    participation = join(study)
    study_set_status(study=study, status=Study.Status.PAUSED)
    with pytest.raises(ApplicationError) as error:
        ask(participation)
    assert "paused" in error.value.message


def test_persona_is_versioned_and_frozen_after_first_query(study, django_capture_on_commit_callbacks):
    participation = join(study)
    second = persona_save(participation=participation, data={**_persona(), "role": "ward manager"})
    assert second.version == 2
    with django_capture_on_commit_callbacks(execute=True):
        query = ask(participation)
    assert query.persona == second
    with pytest.raises(ApplicationError):
        persona_save(participation=participation, data=_persona())


def _persona():
    from tests.annotation.factories import PERSONA

    return dict(PERSONA)


def test_invitation_rules(study):
    from datetime import timedelta

    from django.utils import timezone

    invitation = invitation_create_bulk(study=study, count=1, max_uses=1)[0]
    invitation_accept(token=invitation.token, annotator=None, consent=True)
    with pytest.raises(ApplicationError) as used:
        invitation_accept(token=invitation.token, annotator=None, consent=True)
    assert used.value.status == 410 and "already been used" in used.value.message
    expired = invitation_create_bulk(study=study, count=1, expires_at=timezone.now() - timedelta(hours=1))[0]
    with pytest.raises(ApplicationError) as late:
        invitation_accept(token=expired.token, annotator=None, consent=True)
    assert "expired" in late.value.message
    with pytest.raises(ApplicationError) as bogus:
        invitation_accept(token="nope", annotator=None, consent=True)
    assert bogus.value.status == 404


def test_design_must_fill_a_bracket():
    study = StudyFactory(
        status=Study.Status.DRAFT,
        systems=[
            {"label": "a", "model_name": "extractive-centroid", "condition": "persona"},
        ],
    )
    with pytest.raises(ApplicationError) as error:
        study_set_status(study=study, status=Study.Status.OPEN)
    assert "2 to 32 systems; this study has 1" in error.value.message


def test_failed_generation_is_stored_and_can_be_retried(django_capture_on_commit_callbacks, monkeypatch):
    # A design cannot change once summaries exist, so the failure here is one an operator fixes outside
    # the study: the model server's API key is missing from the environment.
    monkeypatch.delenv("SATISFY_TEST_LLM_KEY", raising=False)
    with openai_standin() as server:
        study = study_with_a_failing_system(server.base_url)
        participation, query = _generated(study, django_capture_on_commit_callbacks)
        bad = query.candidates.get(system__label="bad")
        assert bad.status == Candidate.Status.FAILED and "SATISFY_TEST_LLM_KEY" in bad.failure_reason
        query.refresh_from_db()
        assert query.status == Query.Status.GENERATING
        assert [c.pk for c in candidates_failed()] == [bad.pk]
        # Fix the environment (an operator would), retry, and the bracket is drawn.
        monkeypatch.setenv("SATISFY_TEST_LLM_KEY", "sk-test")
        with django_capture_on_commit_callbacks(execute=True):
            candidate_retry(candidate=bad)
    query.refresh_from_db()
    assert query.status == Query.Status.READY
    assert query.bracket.matches.get().label == "final"


def test_an_empty_reply_is_not_cached_so_the_retry_writes_the_summary(
    django_capture_on_commit_callbacks, settings, tmp_path
):
    # The model server answers one empty completion (content "", as vLLM does when a reply is all
    # reasoning or the server hiccups), then summaries. With the LLM cache on, the empty answer must
    # not be kept: every retry of the task, and the researcher's retry, would read it back.
    settings.LLM_CACHE_DIR = str(tmp_path / "llm")
    replies = iter(["", "  \n"])
    with openai_standin(lambda body: next(replies, "A fresh summary of the abstracts [1].")) as server:
        study = _served_study(server.base_url, use_cache=True)  # the LLM cache on
        participation, query = _generated(study, django_capture_on_commit_callbacks)
        served = query.candidates.get(system__label="served")
        # The task's retries, delivered as a worker would (an eager test run does not re-run them).
        for _ in range(MAX_ATTEMPTS):
            served.refresh_from_db()
            if served.status != Candidate.Status.QUEUED:
                break
            with django_capture_on_commit_callbacks(execute=True), contextlib.suppress(Retry):
                generate_candidate.apply(args=[served.pk], throw=False)
    served.refresh_from_db()
    assert served.status == Candidate.Status.DONE, served.failure_reason
    assert served.text == "A fresh summary of the abstracts [1]."
    assert server.completions == 3
    query.refresh_from_db()
    assert query.status == Query.Status.READY


def _served_study(base_url, **backend_settings):
    return served_study({"base_url": base_url, "use_cache": False, **backend_settings})


def _reasoning_model(body):
    # DeepSeek-R1 or Qwen3 served as a chat model: 100 tokens of thinking (a word is a token here), then the answer.
    return "<think>" + "the nurse asks about sleep " * 20 + "</think>\n\nNight shifts shorten sleep [1]."


def test_a_reasoning_models_summary_is_stored_without_its_thinking(django_capture_on_commit_callbacks):
    with openai_standin(_reasoning_model) as server:
        participation, query = _generated(_served_study(server.base_url), django_capture_on_commit_callbacks)
    served = query.candidates.get(system__label="served")
    assert served.status == Candidate.Status.DONE, served.failure_reason
    # What the annotator reads is the answer; the reasoning stays in the raw response for the researcher.
    assert served.text == "Night shifts shorten sleep [1]."
    assert "the nurse asks about sleep" in served.raw_response["choices"][0]["message"]["content"]


def test_a_reasoning_model_out_of_tokens_fails_at_once_saying_to_raise_max_tokens(django_capture_on_commit_callbacks):
    # All 50 tokens go to the thinking: the reply is empty and stopped at max_tokens. Asking again the same
    # way ends the same way, so no retry is spent on it, and the failure says what to change.
    with openai_standin(_reasoning_model) as server:
        participation, query = _generated(
            _served_study(server.base_url, max_tokens=50), django_capture_on_commit_callbacks
        )
        assert server.completions == 1
    served = query.candidates.get(system__label="served")
    assert served.status == Candidate.Status.FAILED
    assert "ran out of tokens before answering" in served.failure_reason
    assert "Raise max_tokens" in served.failure_reason and "max_tokens 50" in served.failure_reason
    assert "empty summary" not in served.failure_reason


@pytest.mark.parametrize("retry", ["owner-api", "annotator"])
def test_a_running_study_raises_max_tokens_and_its_failed_summary_is_generated_with_it(
    django_capture_on_commit_callbacks, retry
):
    # A crowd study under way: the first question's summary fits in 50 tokens; the second's model thinks first
    # and spends them all. The owner raises max_tokens on the running study and the failed summary is retried:
    # it is generated with the new budget, and each summary records the budget it was generated with.
    replies = iter(["Shift work disturbs sleep [1]."])
    with openai_standin(lambda body: next(replies, None) or _reasoning_model(body)) as server:
        study = _served_study(server.base_url, max_tokens=50)
        _, first = _generated(study, django_capture_on_commit_callbacks)
        earlier = first.candidates.get(system__label="served")
        assert earlier.status == Candidate.Status.DONE and earlier.generation_settings["max_tokens"] == 50
        _, second = _generated(study, django_capture_on_commit_callbacks)
        failed = second.candidates.get(system__label="served")
        assert failed.status == Candidate.Status.FAILED
        assert "Raise max_tokens in this system's backend settings" in failed.failure_reason
        assert "then retry the failed summaries" in failed.failure_reason
        assert "create a new study" not in failed.failure_reason

        owner = APIClient()
        owner.force_authenticate(get_user_model().objects.create_superuser("root", "root@example.org", "pw"))
        url = f"/api/v1/admin/studies/{study.slug}/"
        systems = owner.get(url).json()["systems"]
        raised = [
            {**s, "backend_settings": {**s["backend_settings"], "max_tokens": 400}} if s["label"] == "served" else s
            for s in systems
        ]
        assert owner.patch(url, {"systems": raised}, format="json").status_code == 200
        with django_capture_on_commit_callbacks(execute=True):
            if retry == "owner-api":
                queued = owner.post(f"/api/v1/admin/failed-candidates/retry-all/?study={study.slug}")
                assert queued.json() == {"queued": 1}
            else:  # the waiting page's "try again"
                query_resend(query=second)
    assert [request["max_tokens"] for request in server.requests] == [50, 50, 400]
    failed.refresh_from_db()
    assert failed.status == Candidate.Status.DONE, failed.failure_reason
    assert failed.text == "Night shifts shorten sleep [1]."
    assert failed.generation_settings["max_tokens"] == 400
    earlier.refresh_from_db()
    assert earlier.generation_settings["max_tokens"] == 50
    second.refresh_from_db()
    assert second.status == Query.Status.READY


def test_a_model_server_asking_to_wait_is_retried_after_its_retry_after(django_capture_on_commit_callbacks):
    # A rate-limited server says when to come back (429, Retry-After: 40). The task's own backoff (at most
    # 5, 10 and 20 s) would spend every attempt inside that minute and fail a summary the server would write.
    with openai_standin(script=["429:40"] * 3) as server:
        study = _served_study(server.base_url)
        participation, query = _generated(study, django_capture_on_commit_callbacks)
        served = query.candidates.get(system__label="served")
        assert served.status == Candidate.Status.QUEUED and "429" in served.failure_reason
        # The next attempt, as the worker runs it: rate-limited again, it asks to be retried no sooner.
        with django_capture_on_commit_callbacks(execute=True), pytest.raises(Retry) as retry:
            generate_candidate.apply(args=[served.pk], throw=False)
    assert 40 <= retry.value.when <= 60
    served.refresh_from_db()
    assert served.status == Candidate.Status.QUEUED and served.attempts < MAX_ATTEMPTS


@pytest.mark.parametrize(
    ("reply", "stored"),
    [
        ("Night shifts\u0000 harm sleep [1].", "Night shifts harm sleep [1]."),
        ("Night shifts \ud800harm sleep [1].", "Night shifts \ufffdharm sleep [1]."),
    ],
    ids=["nul", "lone-surrogate"],
)
def test_a_reply_with_a_character_no_database_can_store_is_stored_without_it(
    django_capture_on_commit_callbacks, reply, stored
):
    # JSON can carry \u0000 and a lone \ud800; PostgreSQL's text and jsonb cannot. The summary failed in the
    # database ("Unexpected error (DataError ...)"), and the cached reply failed every retry the same way.
    with openai_standin(lambda body: reply) as server:
        study = _served_study(server.base_url)
        participation, query = _generated(study, django_capture_on_commit_callbacks)
    served = query.candidates.get(system__label="served")
    assert served.status == Candidate.Status.DONE, served.failure_reason
    assert served.text == stored
    assert served.raw_response["choices"][0]["message"]["content"] == stored
    query.refresh_from_db()
    assert query.status == Query.Status.READY


def test_a_model_server_reply_that_never_ends_fails_the_summary_saying_which_cap(
    django_capture_on_commit_callbacks, small_reply_caps
):
    # A study's system points at a server that answers with a body that never ends. The worker reads 64 KiB of
    # it, hangs up, and the summary fails at once (the same request would draw the same reply), saying what to
    # raise; the question's other summaries are written.
    with openai_standin(script=["flood"] * 5) as server:
        participation, query = _generated(_served_study(server.base_url), django_capture_on_commit_callbacks)
        assert server.script.hung_up.wait(5)
        assert server.completions == 1
    served = query.candidates.get(system__label="served")
    assert served.status == Candidate.Status.FAILED
    assert served.failure_reason.startswith(f"standin-model: the reply from {server.base_url} was larger than 64 KiB")
    assert "raise MODEL_SERVER_MAX_RESPONSE_BYTES" in served.failure_reason
    assert query.candidates.get(system__label="extractive").status == Candidate.Status.DONE


def test_a_summary_under_the_cap_is_written(django_capture_on_commit_callbacks, small_reply_caps):
    answer = "Night shifts shorten sleep and raise error rates [1]. " * 200  # 11 KiB
    with openai_standin(lambda body: answer) as server:
        participation, query = _generated(
            _served_study(server.base_url, max_tokens=5000), django_capture_on_commit_callbacks
        )
    served = query.candidates.get(system__label="served")
    assert served.status == Candidate.Status.DONE, served.failure_reason
    assert served.text == answer.strip()


def test_an_openalex_reply_over_the_cap_fails_the_question_saying_which_cap(
    django_capture_on_commit_callbacks, small_reply_caps, settings
):
    with openalex_standin(script=["announced"]) as server:
        settings.OPENALEX_BASE_URL = server.base_url
        participation = join(StudyFactory(retrieval_backend="openalex"))
        with django_capture_on_commit_callbacks(execute=True):
            query = ask(participation)
        assert server.script.hung_up.wait(5)
        assert server.calls == 1
    query.refresh_from_db()
    assert query.status == Query.Status.FAILED
    assert query.failure_reason.startswith("OpenAlex's reply was larger than 64 KiB; its Content-Length says 1 GiB")
    assert "raise OPENALEX_MAX_RESPONSE_BYTES" in query.failure_reason
