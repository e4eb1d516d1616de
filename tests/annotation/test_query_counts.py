"""Exact query counts of the annotator's pages and the hot API endpoints, in the manner of Zulip's
assert_database_query_count: an added query fails here, so adding one is a visible decision.

Each pin's comment lists its queries. "Session, user": the session row and the signed-in user that every
page after joining loads first (for the API, one token lookup joined to its user). "(sp)": a
`transaction.atomic` block, which counts two statements here (SAVEPOINT and RELEASE) because the test runs
inside a transaction; in production it is a BEGIN and COMMIT that are not counted. Every annotator page's
pin also counts, before the view runs, the study's language (by the page's slug or invitation token,
annotation.middleware), which the comments leave out.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Match, Query
from studies.services.invitation import invitation_create_bulk
from tests.annotation.factories import PERSONA, StudyFactory, prewritten_adaptive_study

pytestmark = pytest.mark.django_db


def _pending_match() -> Match:
    match = Match.objects.filter(status=Match.Status.PENDING).order_by("round", "index").first()
    assert match is not None
    return match


def test_the_annotator_journey_pages(django_assert_num_queries, django_capture_on_commit_callbacks):
    study = StudyFactory(slug="sleep")
    invitation = invitation_create_bulk(study=study, count=1, max_uses=5)[0]
    client = Client()
    join = reverse("annotation:join", args=[invitation.token])
    router = reverse("annotation:study", args=["sleep"])
    profile = reverse("annotation:profile", args=["sleep"])
    ask = reverse("annotation:ask", args=["sleep"])
    wait = reverse("annotation:wait", args=["sleep", 1])
    status = reverse("annotation:status", args=["sleep", 1])
    compare = reverse("annotation:compare", args=["sleep", 1])

    # Consent page, not signed in yet: the invitation with its study.
    with django_assert_num_queries(2):
        assert client.get(join).status_code == 200
    # Consent given: invitation; (sp: the accept and the sign-in are one transaction) accept (sp): invitation,
    # claim a use, user insert (its password unusable), code check, participation insert; login: session key
    # check, session insert (sp), last_login; session save (sp); the login throttle (axes, added): its
    # expired-attempt clean-up and its reset-on-success, each a lookup that finds nothing to delete. Once per
    # annotator, and no IP address is stored (AXES_DISABLE_ACCESS_LOG).
    with django_assert_num_queries(21):
        assert client.post(join, {"consent": "on"}).status_code == 302

    # Persona page: session, user, participation with study, current persona, any question asked.
    with django_assert_num_queries(6):
        assert client.get(profile).status_code == 200
    # Persona saved: the page's 5; persona_save (sp): lock participation, any question asked, current persona,
    # persona insert.
    with django_assert_num_queries(12):
        assert client.post(profile, PERSONA).status_code == 302

    # Study router, to the question page: session, user, participation with study, current query, current
    # persona, questions used; then choosing the next page reads current persona and current query again.
    with django_assert_num_queries(9):
        assert client.get(router)["Location"] == ask

    # Question page: session, user, participation with study, questions used, current query, current persona,
    # whether the study has pre-written items (then it offers the next item instead), any question asked.
    with django_assert_num_queries(9):
        page = client.get(ask)
    assert page.status_code == 200
    token = re.search(r'name="client_token" value="([0-9a-f]+)"', page.content.decode()).group(1)
    # Question asked: session, user, participation with study, questions used, whether the study has
    # pre-written items; query_submit (sp): lock
    # participation with study, one tally of the questions (the client token's, unfinished, used, last index),
    # current persona, query insert. Retrieval is enqueued on commit, held back here until the waiting page is
    # counted.
    with django_capture_on_commit_callbacks() as background:
        with django_assert_num_queries(12):
            assert (
                client.post(ask, {"text": "How does night shift affect sleep?", "client_token": token})["Location"]
                == wait
            )

    # Waiting page, first shown: session, user, participation with study, query, first-shown update (time on
    # the waiting page, added), candidate progress (which also says whether one failed: the separate
    # failed-candidate query is gone, so the count is unchanged), the question's number (its place among the
    # questions that count: one set aside takes none, added).
    with django_assert_num_queries(8):
        assert client.get(wait).status_code == 200
    # Reloaded: the same without the first-shown update.
    with django_assert_num_queries(7):
        assert client.get(wait).status_code == 200
    # Its status poll: session, user, participation with study, query, candidate progress (one fewer than
    # before: failure and the deadline's message come from the progress rows).
    with django_assert_num_queries(6):
        assert client.get(status).json()["status"] == Query.Status.RETRIEVING

    with django_capture_on_commit_callbacks(execute=True):
        for callback in background:
            callback()  # retrieval, then generation of the four candidates (eager tasks)
    assert Query.objects.get().status == Query.Status.READY

    # Match page, first shown: session, user, participation with study, current match with its query and
    # both candidates (one read: the query was a statement of its own before), first-shown update, bracket
    # progress, documents (the question's number, as on the waiting page, comes with the match).
    with django_assert_num_queries(8):
        assert client.get(compare).status_code == 200
    # Match page reloaded: the same without the first-shown update.
    with django_assert_num_queries(7):
        assert client.get(compare).status_code == 200
    # Choice, round one, sibling pending: session, user, participation with study; judgment_record_on_page
    # (sp): one locked read of the bracket's matches (attention checks included) with bracket, query,
    # participation, study and judgments (it also checks the posted match is the one on screen: the view no
    # longer reads the query and the match first), judgment insert (no savepoint: the lock makes a second
    # insert impossible), match answered (the sibling comes from the locked read). The minimum: one locked
    # read, one insert, the advance.
    answer = {"match_id": _pending_match().pk, "choice": "left"}
    with django_assert_num_queries(9):
        assert client.post(compare, answer)["Location"] == router
    # Study router after a choice (post/redirect/get): session, user, participation with study, current query;
    # then choosing the next page reads current persona and current query again.
    with django_assert_num_queries(7):
        assert client.get(router)["Location"] == compare

    client.get(compare)
    # Choice completing round one: the 9 above, then the final's insert (whether it exists: the locked read).
    answer = {"match_id": _pending_match().pk, "choice": "left"}
    with django_assert_num_queries(10):
        assert client.post(compare, answer).status_code == 302
    client.get(compare)
    # Choice in the final: round one's 9, then query ranked (what is still pending: the locked read), and the
    # questions ranked so far (the page says when this one earned the completion code; issue 33).
    answer = {"match_id": _pending_match().pk, "choice": "left"}
    with django_assert_num_queries(11):
        assert client.post(compare, answer).status_code == 302
    assert Query.objects.get().status == Query.Status.RANKED

    # Finish: session, user, participation with study; participation_finish (sp): lock participation,
    # any open question, completion code update.
    with django_assert_num_queries(9):
        assert client.post(reverse("annotation:finish", args=["sleep"]))["Location"].endswith("/done/")
    # Completion page: session, user, participation with study, questions ranked.
    with django_assert_num_queries(5):
        assert client.get(reverse("annotation:done", args=["sleep"])).status_code == 200


def test_hot_endpoints_have_pinned_query_counts(django_assert_num_queries, django_capture_on_commit_callbacks):
    study = StudyFactory(slug="api")
    invitation = invitation_create_bulk(study=study, count=1)[0]
    # Anonymous accept: (sp: the accept and the token are one transaction) (sp) invitation, claim a use, user
    # insert (its password unusable), code check, participation insert, the new account's token insert. A
    # participation just created has no persona: the body reads none.
    with django_assert_num_queries(10):
        accepted = APIClient().post(f"/api/v1/invitations/{invitation.token}/accept/", {"consent": True}, format="json")
    assert accepted.status_code == 201
    me = accepted.json()
    annotator = get_user_model().objects.get(auth_token__key=me["token"])
    assert not annotator.has_usable_password() and annotator.participations.get().pk == me["id"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {me['token']}")
    client.put(f"/api/v1/participations/{me['id']}/persona/", PERSONA, format="json")
    with django_capture_on_commit_callbacks(execute=True):
        qid = client.post(f"/api/v1/participations/{me['id']}/queries/", {"text": "sleep"}, format="json").json()["id"]

    # Query status: token with user, the query if it is the caller's, documents, candidate progress.
    with django_assert_num_queries(4):
        assert client.get(f"/api/v1/queries/{qid}/").json()["status"] == Query.Status.READY
    # Current match: token with user, match with its query, participation, study and both candidates (one
    # read: the query was a statement of its own before), first-shown update.
    with django_assert_num_queries(3):
        match_id = client.get(f"/api/v1/queries/{qid}/current-match/").json()["id"]
    # Reloaded: the same without the first-shown update.
    with django_assert_num_queries(2):
        assert client.get(f"/api/v1/queries/{qid}/current-match/").json()["id"] == match_id
    # Choice, round one, sibling pending: token with user; judgment_record_as (sp): one locked read of the
    # bracket's matches with bracket, query, participation, study and judgments (which also checks the match
    # is the caller's: the view no longer reads it first), judgment insert (no savepoint: under the lock a
    # second insert is impossible), match answered (the sibling comes from the locked read).
    with django_assert_num_queries(6):
        assert client.post(f"/api/v1/matches/{match_id}/choice/", {"choice": "left"}, format="json").status_code == 200

    match_id = client.get(f"/api/v1/queries/{qid}/current-match/").json()["id"]
    # Choice completing round one: the 6 above, then the final's insert.
    with django_assert_num_queries(7):
        assert client.post(f"/api/v1/matches/{match_id}/choice/", {"choice": "left"}, format="json").status_code == 200
    match_id = client.get(f"/api/v1/queries/{qid}/current-match/").json()["id"]
    # Choice in the final: round one's 6, then query ranked.
    with django_assert_num_queries(7):
        assert client.post(f"/api/v1/matches/{match_id}/choice/", {"choice": "left"}, format="json").status_code == 200
    # No match left: token with user, the empty current-match lookup, the query (someone else's is a 404).
    with django_assert_num_queries(3):
        assert client.get(f"/api/v1/queries/{qid}/current-match/").status_code == 204


def test_retrieval_and_generation_have_pinned_statement_counts(
    django_assert_num_queries, django_capture_on_commit_callbacks
):
    """The background path of one question (bench/generation.py runs it 100 times over: at a 200 ms model
    latency the queue is bound by this CPU, in the worker and in PostgreSQL)."""
    from annotation.models import Candidate
    from annotation.services.generation import candidate_generate
    from annotation.services.query import query_retrieve, query_submit
    from tests.annotation.factories import join

    study = StudyFactory(slug="background")
    with django_capture_on_commit_callbacks(execute=False):
        query = query_submit(participation=join(study), text="night shifts and sleep", client_token="")
    # Retrieval: the question with its study and template and whether it has sources (one read), the lease,
    # the sources' insert; (sp) the status moved on (locking the row), the systems, the candidates' insert,
    # their ids (the sends follow the commit).
    with django_capture_on_commit_callbacks(execute=False) as sent, django_assert_num_queries(9):
        query_retrieve(query_id=query.pk)
    assert len(sent) == 4
    ids = list(Candidate.objects.filter(query=query).order_by("pk").values_list("pk", flat=True))
    # A candidate that is not the last: the candidate with its system, question, persona and template (one
    # read), the sources, the claim (which stores the prompt), the result, whether any is unfinished.
    for candidate_id in ids[:3]:
        with django_assert_num_queries(5):
            candidate_generate(candidate_id=candidate_id)
    # The last: the same 5; (sp) the question locked with its study, unfinished again under the lock, the
    # bracket not there yet, the candidates, their positions (one update), the bracket, its two first-round
    # matches (one insert), the question ready.
    with django_assert_num_queries(15):
        candidate_generate(candidate_id=ids[3])
    query.refresh_from_db()
    assert query.status == Query.Status.READY


def test_an_adaptive_choice_has_pinned_statement_counts(django_assert_num_queries):
    """The adaptive design's hot path: choosing the next pair reads the study's tallies once and adds the answer
    to them in one statement, however many systems and answers the study has."""
    study = prewritten_adaptive_study(5, items=1)
    invitation = invitation_create_bulk(study=study, count=1)[0]
    me = APIClient().post(f"/api/v1/invitations/{invitation.token}/accept/", {"consent": True}, format="json").json()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {me['token']}")
    client.put(f"/api/v1/participations/{me['id']}/persona/", PERSONA, format="json")
    qid = client.post(f"/api/v1/participations/{me['id']}/next-item/", {"client_token": "t"}).json()["id"]

    def current() -> int:
        return client.get(f"/api/v1/queries/{qid}/current-match/").json()["id"]

    def answer(match_id: int, choice: str) -> None:
        assert client.post(f"/api/v1/matches/{match_id}/choice/", {"choice": choice}, format="json").status_code == 200

    # Current match: as for a bracket (token with user, the match with all it shows, first-shown update).
    with django_assert_num_queries(3):
        match_id = current()
    # Choice: token with user; judgment_record_as (sp): the locked read, judgment insert, match answered; then the
    # study's tallies (one read), the next pair's insert, and the answer added to the tallies (one upsert).
    with django_assert_num_queries(9):
        answer(match_id, "left")
    # "Neither" adds nothing to the tallies: the same without the upsert (two summaries retired, three left).
    match_id = current()
    with django_assert_num_queries(8):
        answer(match_id, "neither")
    match_id = current()
    with django_assert_num_queries(9):
        answer(match_id, "right")
    # The last of the question's 4 comparisons (5 systems): no next pair to choose (no read, no insert); the
    # upsert, and the question ranked.
    match_id = current()
    with django_assert_num_queries(8):
        answer(match_id, "left")
    assert client.get(f"/api/v1/queries/{qid}/").json()["status"] == Query.Status.RANKED
