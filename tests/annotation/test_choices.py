"""The annotator's choices through the services and the API: ties carried through a whole bracket, comments
per match and per question, and the policies for identical or near-identical candidates."""

from __future__ import annotations

import random

import pytest
from rest_framework.test import APIClient

from analysis.selectors import comparison_rows
from annotation.models import Candidate, Judgment, Match, Query
from annotation.selectors.tournament import match_current, match_progress
from annotation.services.generation import MAX_REGENERATIONS
from annotation.services.query import query_submit
from annotation.services.tournament import COMMENT_MAX_CHARS, judgment_record
from kernel.exceptions import ApplicationError
from studies.models import Study
from studies.services.invitation import invitation_create_bulk
from tests.annotation.factories import PERSONA, StudyFactory, join
from tests.support.openai_standin import openai_standin

pytestmark = pytest.mark.django_db

QUESTION = "How does night shift work affect nurses' sleep and patient safety?"


def _generated(study, capture):
    participation = join(study)
    with capture(execute=True):
        query = query_submit(participation=participation, text=QUESTION, client_token="t1")
    query.refresh_from_db()
    return participation, query


def _coin_side(seed: int, round_number: int, index: int) -> str:
    """The documented tie rule (docs/annotators.md), written out independently of the service."""
    return "left" if random.Random(f"{seed}:tie:{round_number}:{index}").random() < 0.5 else "right"


def test_ties_advance_the_seeded_coins_side_and_a_tied_final_has_no_winner(django_capture_on_commit_callbacks):
    study = StudyFactory(allow_ties=True)
    participation, query = _generated(study, django_capture_on_commit_callbacks)
    seed = query.bracket.seed
    first = match_current(query=query)
    tie = judgment_record(match=first, choice="tie", by=participation)
    advanced = first.left_id if _coin_side(seed, 1, first.index) == "left" else first.right_id
    assert tie.choice == "tie" and tie.winner_id == advanced and not tie.automatic
    second = match_current(query=query)
    judgment_record(match=second, choice="right", by=participation)
    final = match_current(query=query)
    assert final.label == "final"
    # The coin's side met the other match's winner; the player still counts the final as a match to play.
    assert {final.left_id, final.right_id} == {advanced, second.right_id}
    assert match_progress(match=final) == (2, 3)
    last = judgment_record(match=final, choice="tie", by=participation)
    assert last.winner_id is None
    query.refresh_from_db()
    assert query.status == Query.Status.RANKED
    rows = {r["match"]: r for r in comparison_rows(study=study, with_scores=False)}
    assert [rows[label]["choice"] for label in ("round1_ab", "round1_cd", "final")] == ["tie", "right", "tie"]
    # A tie is nobody's win in the table: the coin's pick is only the side that moved on.
    assert rows["round1_ab"]["winner_side"] is None and rows["round1_ab"]["winner_system"] is None
    assert rows["round1_ab"]["advanced_side"] == _coin_side(seed, 1, first.index)
    assert rows["round1_cd"]["advanced_side"] == "right"
    assert rows["final"]["advanced_side"] is None and rows["final"]["winner_side"] is None
    # The same tie again is the recorded answer; a different answer is refused.
    assert judgment_record(match=final, choice="tie", by=participation).pk == last.pk
    with pytest.raises(ApplicationError) as error:
        judgment_record(match=final, choice="left", by=participation)
    assert error.value.status == 409 and "both equally good" in error.value.message


def test_a_tie_is_refused_where_the_study_offers_none(django_capture_on_commit_callbacks):
    participation, query = _generated(StudyFactory(), django_capture_on_commit_callbacks)
    with pytest.raises(ApplicationError) as error:
        judgment_record(match=match_current(query=query), choice="tie", by=participation)
    assert error.value.status == 400 and error.value.field == "choice"
    assert not Judgment.objects.exists()


def _api_annotator(study, capture):
    invitation = invitation_create_bulk(study=study, count=1)[0]
    body = APIClient().post(f"/api/v1/invitations/{invitation.token}/accept/", {"consent": True}, format="json").json()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {body['token']}")
    client.put(f"/api/v1/participations/{body['id']}/persona/", PERSONA, format="json")
    with capture(execute=True):
        query = client.post(f"/api/v1/participations/{body['id']}/queries/", {"text": QUESTION}, format="json").json()
    match = client.get(f"/api/v1/queries/{query['id']}/current-match/").json()
    return client, match


@pytest.mark.parametrize("allow_ties", [False, True])
def test_the_api_takes_a_tie_and_a_comment_only_where_the_study_offers_them(
    allow_ties, django_capture_on_commit_callbacks
):
    study = StudyFactory(allow_ties=allow_ties, comments=Study.Comments.MATCH if allow_ties else Study.Comments.OFF)
    client, match = _api_annotator(study, django_capture_on_commit_callbacks)
    url = f"/api/v1/matches/{match['id']}/choice/"
    response = client.post(url, {"choice": "tie", "comment": "Both cite the same trial."}, format="json")
    if not allow_ties:
        assert response.status_code == 400
        assert "both equally good" in response.json()["extra"]["fields"]["choice"][0]
        commented = client.post(url, {"choice": "left", "comment": "Hello"}, format="json")
        assert commented.status_code == 400 and "comment" in commented.json()["extra"]["fields"]
        assert not Judgment.objects.exists()
        return
    assert response.status_code == 200, response.json()
    assert response.json()["choice"] == "tie" and response.json()["comment"] == "Both cite the same trial."
    too_long = client.post(url, {"choice": "tie", "comment": "x" * (COMMENT_MAX_CHARS + 1)}, format="json")
    assert too_long.status_code == 400 and "comment" in too_long.json()["extra"]["fields"]


def test_the_api_counts_a_crlf_line_break_in_a_comment_as_one_character(django_capture_on_commit_callbacks):
    study = StudyFactory(comments=Study.Comments.MATCH)
    client, match = _api_annotator(study, django_capture_on_commit_callbacks)
    at_the_limit = ("Clearer.\n" * 300)[:COMMENT_MAX_CHARS].replace("\n", "\r\n")  # as a form-encoding client sends
    assert len(at_the_limit.replace("\r\n", "\n")) == COMMENT_MAX_CHARS
    answered = client.post(f"/api/v1/matches/{match['id']}/choice/", {"choice": "left", "comment": at_the_limit})
    assert answered.status_code == 200, answered.json()
    assert Judgment.objects.get().comment == at_the_limit.replace("\r\n", "\n").strip()


def test_comments_are_kept_per_match_or_per_question_and_exported(django_capture_on_commit_callbacks):
    per_match = StudyFactory(comments=Study.Comments.MATCH)
    participation, query = _generated(per_match, django_capture_on_commit_callbacks)
    judgment_record(match=match_current(query=query), choice="left", by=participation, comment="  Clearer.  ")
    judgment_record(match=match_current(query=query), choice="right", by=participation)
    rows = comparison_rows(study=per_match, with_scores=False)
    assert [r["comment"] for r in rows] == ["Clearer.", None]
    assert all(r["question_comment"] is None for r in rows)

    per_question = StudyFactory(comments=Study.Comments.QUESTION)
    participation, query = _generated(per_question, django_capture_on_commit_callbacks)
    judgment_record(match=match_current(query=query), choice="left", by=participation, comment="First thought")
    judgment_record(match=match_current(query=query), choice="left", by=participation, comment="Second thought")
    query.refresh_from_db()
    assert query.feedback == "Second thought"  # one comment per question: the latest replaces the earlier
    assert not Judgment.objects.filter(match__bracket__query=query).exclude(comment="").exists()
    rows = comparison_rows(study=per_question, with_scores=False)
    assert {r["question_comment"] for r in rows} == {"Second thought"} and {r["comment"] for r in rows} == {None}
    with pytest.raises(ApplicationError) as error:
        judgment_record(
            match=match_current(query=query), choice="left", by=participation, comment="y" * (COMMENT_MAX_CHARS + 1)
        )
    assert error.value.field == "comment" and error.value.status == 400


def test_the_service_counts_a_line_break_as_one_character_whoever_calls_it(django_capture_on_commit_callbacks):
    """Plain Python (a script, a management command) reaches judgment_record without the form's or the API
    field's normalising: a comment at the limit with CRLF line breaks is taken, stored with LF."""
    participation, query = _generated(StudyFactory(comments=Study.Comments.MATCH), django_capture_on_commit_callbacks)
    at_the_limit = ("Clearer.\n" * 300)[:COMMENT_MAX_CHARS]
    match = match_current(query=query)
    judgment = judgment_record(match=match, choice="left", by=participation, comment=at_the_limit.replace("\n", "\r\n"))
    assert Judgment.objects.get(pk=judgment.pk).comment == at_the_limit.strip()


def _standin_study(base_url: str, policy: str) -> Study:
    """Four systems on the stand-in model server: two models, each with and without the persona."""
    return StudyFactory(
        identical_policy=policy,
        allow_ties=True,
        systems=[
            {
                "label": f"{model}-{condition}",
                "model_name": model,
                "condition": condition,
                "generation_backend": "openai",
                "backend_settings": {"base_url": base_url, "use_cache": False},
            }
            for model in ("alpha", "beta")
            for condition in ("persona", "generic")
        ],
    )


SAME = "Night shifts shorten nurses' sleep by about an hour and raise medication errors [1]."


def test_identical_candidates_are_recorded_as_ties_without_asking(django_capture_on_commit_callbacks):
    with openai_standin(lambda body: SAME) as server:
        study = _standin_study(server.base_url, Study.IdenticalPolicy.TIE)
        _, query = _generated(study, django_capture_on_commit_callbacks)
    query.refresh_from_db()
    # Four identical summaries: both first-round matches and the final were tied, and nothing was asked.
    assert query.status == Query.Status.RANKED and match_current(query=query) is None
    judgments = Judgment.objects.filter(match__bracket__query=query).select_related("match")
    assert sorted(j.match.label for j in judgments) == ["final", "round1_ab", "round1_cd"]
    assert all(j.choice == "tie" and j.automatic for j in judgments)
    rows = comparison_rows(study=study, with_scores=False)
    assert {(r["identical"], r["similarity"], r["tie_automatic"]) for r in rows} == {("exact", 100.0, True)}
    assert all(r["winner_side"] is None for r in rows)


def test_near_identical_candidates_are_shown_with_a_notice_and_flagged(django_capture_on_commit_callbacks):
    # The two models' summaries differ in one word of 14 (token similarity 92.86); within a model they are equal.
    def responder(body):
        return SAME if body["model"] == "alpha" else SAME.replace("about", "roughly")

    with openai_standin(responder) as server:
        study = _standin_study(server.base_url, Study.IdenticalPolicy.NOTICE)
        participation, query = _generated(study, django_capture_on_commit_callbacks)
    assert query.status == Query.Status.READY
    matches = list(Match.objects.filter(bracket__query=query).select_related("left", "right"))
    for match in matches:
        same_model = match.left.model_name == match.right.model_name
        assert (match.identical, match.similarity) == (("exact", 100.0) if same_model else ("near", 92.86))
    for _ in range(3):
        match = match_current(query=query)
        if match is None:
            break
        judgment_record(match=match, choice="left", by=participation)
    rows = comparison_rows(study=study, with_scores=False)
    assert rows and all(r["identical"] in ("exact", "near") and not r["tie_automatic"] for r in rows)


def test_identical_candidates_are_generated_again_a_bounded_number_of_times(django_capture_on_commit_callbacks):
    calls: dict[str, int] = {}

    def stubborn(body):  # the same summary whatever is asked: regeneration cannot help
        calls[body["model"]] = calls.get(body["model"], 0) + 1
        return SAME

    with openai_standin(stubborn) as server:
        study = _standin_study(server.base_url, Study.IdenticalPolicy.REGENERATE)
        _, query = _generated(study, django_capture_on_commit_callbacks)
        # The first candidate stays; the three alike with it are generated again twice each, then shown.
        assert server.completions == 4 + 3 * MAX_REGENERATIONS
    query.refresh_from_db()
    assert query.status == Query.Status.READY
    assert sorted(Candidate.objects.filter(query=query).values_list("regenerations", flat=True)) == [0, 2, 2, 2]
    assert all(m.identical == "exact" for m in Match.objects.filter(bracket__query=query))

    def second_try_differs(body):
        key = f"{body['model']}:{'Role:' in str(body['messages'])}"
        calls[key] = calls.get(key, 0) + 1
        return SAME if calls[key] == 1 else f"Attempt {calls[key]} for {key}: rotas matter most [1]."

    with openai_standin(second_try_differs) as server:
        study = _standin_study(server.base_url, Study.IdenticalPolicy.REGENERATE)
        _, query = _generated(study, django_capture_on_commit_callbacks)
        assert server.completions == 4 + 3
    assert sorted(Candidate.objects.filter(query=query).values_list("regenerations", flat=True)) == [0, 1, 1, 1]
    assert not Match.objects.filter(bracket__query=query).exclude(identical="").exists()
