"""Joining: accepting is idempotent (200 for the existing participation, 201 when created), also for two
accepts by one account at the same moment, and a used single-use link is refused before the consent page."""

from __future__ import annotations

import contextlib
import threading

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Participation
from annotation.services.participation import invitation_join
from studies.services.invitation import invitation_create_bulk
from tests.annotation.factories import PERSONA, StudyFactory, UserFactory


@pytest.mark.django_db
def test_a_used_single_use_link_is_refused_before_the_consent_page():
    study = StudyFactory(slug="sleep")
    invitation = invitation_create_bulk(study=study, count=1)[0]
    first = Client()
    assert first.post(reverse("annotation:join", args=[invitation.token]), {"consent": "on"}).status_code == 302

    someone_else = Client().get(reverse("annotation:join", args=[invitation.token]))
    assert someone_else.status_code == 410
    text = someone_else.content.decode()
    assert "This invitation has already been used" in text and "agree to take part" not in text
    # The one who used it is sent on to their study, not refused.
    assert first.get(reverse("annotation:join", args=[invitation.token]))["Location"] == "/study/sleep/"


@pytest.mark.django_db
def test_accepting_again_answers_200_with_the_same_participation():
    study = StudyFactory()
    first, second = invitation_create_bulk(study=study, count=2)
    created = APIClient().post(f"/api/v1/invitations/{first.token}/accept/", {"consent": True}, format="json")
    assert created.status_code == 201
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {created.json()['token']}")
    for token in (first.token, second.token):
        again = client.post(f"/api/v1/invitations/{token}/accept/", {"consent": True}, format="json")
        assert again.status_code == 200 and again.json()["id"] == created.json()["id"]
    second.refresh_from_db()
    assert second.uses == 0  # an existing participation claims no use


@pytest.mark.timeout(60)
def test_accepts_sent_at_once_by_one_account_answer_with_one_participation_and_its_persona(
    transactional_db: None,
) -> None:
    """Only the accept that made the participation may skip reading its persona: two sent at the same moment
    (a double tap, two devices) answer with one participation, and once a persona is saved every later accept
    shows it."""
    study = StudyFactory(slug="accept-twice")
    invitations = invitation_create_bulk(study=study, count=4)
    made = APIClient().post(f"/api/v1/invitations/{invitations[0].token}/accept/", {"consent": True}, format="json")
    token = made.json()["token"]
    barrier = threading.Barrier(2)
    answers: list[object] = []

    def accept(invitation_token: str) -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        try:
            barrier.wait()
            answers.append(
                client.post(f"/api/v1/invitations/{invitation_token}/accept/", {"consent": True}, format="json")
            )
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            answers.append(error)
        finally:
            connection.close()

    def together(tokens: list[str]) -> list[dict]:
        answers.clear()
        threads = [threading.Thread(target=accept, args=(t,)) for t in tokens]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert [getattr(a, "status_code", a) for a in answers] == [200, 200], answers
        return [a.json() for a in answers]  # type: ignore[union-attr]

    first = together([invitations[1].token, invitations[2].token])
    assert {b["id"] for b in first} == {made.json()["id"]} and all(b["persona"] is None for b in first)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.put(f"/api/v1/participations/{made.json()['id']}/persona/", PERSONA, format="json").status_code == 200
    later = together([invitations[3].token, invitations[0].token])
    assert all(b["persona"] and b["persona"]["role"] == PERSONA["role"] for b in later)
    assert Participation.objects.filter(study=study).count() == 1


@pytest.mark.timeout(60)
def test_two_invitations_accepted_at_once_by_one_account_make_one_participation(transactional_db: None) -> None:
    study = StudyFactory()
    user = UserFactory()
    invitations = invitation_create_bulk(study=study, count=2)
    barrier = threading.Barrier(2)
    results: list[object] = []

    def accept(token: str) -> None:
        try:
            barrier.wait()
            results.append(invitation_join(token=token, annotator=user, consent=True))
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            results.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=accept, args=(i.token,)) for i in invitations]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert all(isinstance(r, tuple) for r in results), results
    assert sorted(created for _, created in results) == [False, True]  # type: ignore[misc]
    assert Participation.objects.filter(study=study, annotator=user).count() == 1


@contextlib.contextmanager
def inserts_refused(table: str):  # type: ignore[no-untyped-def]
    """The database refuses every insert into `table` (a trigger) until the block ends: a storage fault at
    the last write of an accept, caused for real rather than mocked."""
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE OR REPLACE FUNCTION test_refuse_insert() RETURNS trigger AS $$ "
            "BEGIN RAISE EXCEPTION 'storage refused the row'; END $$ LANGUAGE plpgsql"
        )
        cursor.execute(
            f"CREATE TRIGGER test_refuse_insert BEFORE INSERT ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION test_refuse_insert()"
        )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TRIGGER IF EXISTS test_refuse_insert ON {table}")
            cursor.execute("DROP FUNCTION IF EXISTS test_refuse_insert()")


@pytest.mark.parametrize("way", ["api", "page"])
def test_an_accept_that_fails_at_its_last_write_spends_nothing_and_can_be_sent_again(transactional_db, way):
    """A single-use link whose accept fails after the participation is written (the API token's insert, the
    page's session) must not be used up: the annotator sends it again and joins."""
    study = StudyFactory(slug=f"fault-{way}")
    invitation = invitation_create_bulk(study=study, count=1)[0]
    if way == "api":
        client, table = APIClient(raise_request_exception=False), "authtoken_token"

        def accept():  # type: ignore[no-untyped-def]
            return client.post(f"/api/v1/invitations/{invitation.token}/accept/", {"consent": True}, format="json")
    else:
        client, table = Client(raise_request_exception=False), "django_session"

        def accept():  # type: ignore[no-untyped-def]
            return client.post(reverse("annotation:join", args=[invitation.token]), {"consent": "on"})

    with inserts_refused(table):
        assert accept().status_code == 500
    invitation.refresh_from_db()
    assert invitation.uses == 0
    assert not Participation.objects.filter(study=study).exists()
    again = accept()
    assert again.status_code == (201 if way == "api" else 302)
    assert Participation.objects.filter(study=study).count() == 1
