"""Questions of different annotators never wait for each other: asking locks the annotator's participation
only. With the study's row locked too (FOR UPDATE over the join), a class asking at the same moment queued
in the database one question at a time while the web server stood idle (bench/load.py, the human phase)."""

from __future__ import annotations

import threading

import pytest
from django.db import OperationalError, connection, transaction

from annotation.models import Query
from annotation.services.query import query_submit
from tests.annotation.factories import StudyFactory, join
from tests.support.races import at_once

QUESTION = "How does night shift work affect nurses' sleep and patient safety?"


def test_a_question_is_saved_while_another_annotators_question_is_still_being_saved(transactional_db: None) -> None:
    study = StudyFactory(slug="two-askers")
    first, second = join(study), join(study)
    first_saved, may_commit = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def ask_and_hold() -> None:
        try:
            with transaction.atomic():
                query_submit(participation=first, text=QUESTION, client_token="first")
                first_saved.set()
                may_commit.wait(timeout=30)  # the first annotator's request is still in its transaction
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            errors.append(error)
        finally:
            first_saved.set()
            connection.close()

    holder = threading.Thread(target=ask_and_hold)
    holder.start()
    try:
        assert first_saved.wait(timeout=30)
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:  # waiting on a lock the first holds fails instead of hanging
                    cursor.execute("SET LOCAL lock_timeout = '3s'")
                query = query_submit(participation=second, text=QUESTION, client_token="second")
        except OperationalError as error:
            pytest.fail(f"the second annotator's question waited for the first one's transaction: {error}")
    finally:
        may_commit.set()
        holder.join(timeout=30)
    assert not errors, errors
    assert query.participation_id == second.pk
    assert set(Query.objects.filter(participation__study=study).values_list("client_token", flat=True)) == {
        "first",
        "second",
    }


def test_one_annotators_two_questions_at_once_still_make_one(transactional_db: None) -> None:
    """What the participation's lock is for: the same question sent twice at once (a double click, a retry)
    is one question, and a second one waits for the first to be ranked."""
    participation = join(StudyFactory(slug="one-asker"))

    def ask() -> int:
        return query_submit(participation=participation, text=QUESTION, client_token="same").pk

    results = at_once(ask, ask)
    assert len(results) == 2 and all(isinstance(r, int) for r in results), results
    assert len(set(results)) == 1
    assert Query.objects.filter(participation=participation).count() == 1


@pytest.mark.django_db
def test_no_statement_of_an_annotators_journey_locks_the_study_row(django_capture_on_commit_callbacks) -> None:
    """The class of the bug above: a FOR UPDATE over a join locks a row of every table joined unless it names
    its own (`select_for_update(of=...)`). One annotator's work (joining, the persona, a question with its
    retrieval, generation and bracket, three answers, finishing) must lock nothing every other annotator
    needs: never the study's row."""
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    from studies.models import Study
    from studies.services.invitation import invitation_create_bulk
    from tests.annotation.factories import PERSONA

    study = StudyFactory(slug="no-study-lock")
    invitation = invitation_create_bulk(study=study, count=1)[0]
    client = APIClient()
    with CaptureQueriesContext(connection) as ctx:
        me = client.post(f"/api/v1/invitations/{invitation.token}/accept/", {"consent": True}, format="json").json()
        client.credentials(HTTP_AUTHORIZATION=f"Token {me['token']}")
        client.put(f"/api/v1/participations/{me['id']}/persona/", PERSONA, format="json")
        with django_capture_on_commit_callbacks(execute=True):
            asked = client.post(f"/api/v1/participations/{me['id']}/queries/", {"text": QUESTION}, format="json")
        qid = asked.json()["id"]
        for _ in range(3):
            current = client.get(f"/api/v1/queries/{qid}/current-match/")
            if current.status_code == 204:
                break
            client.post(f"/api/v1/matches/{current.json()['id']}/choice/", {"choice": "left"}, format="json")
        client.post(f"/api/v1/participations/{me['id']}/finish/")
    assert Query.objects.get(pk=qid).status == Query.Status.RANKED

    study_table = connection.ops.quote_name(Study._meta.db_table)
    locking = [q["sql"] for q in ctx.captured_queries if "FOR UPDATE" in q["sql"]]
    assert locking, "the journey takes its locks"
    for sql in locking:
        clause = sql[sql.index("FOR UPDATE") :]
        joins_study = study_table in sql
        assert not (joins_study and " OF " not in clause), f"locks every joined row, the study's too: {sql}"
        assert study_table not in clause, f"locks the study's row: {sql}"
