"""Joining: accepting is idempotent (200 for the existing participation, 201 when created), also for two
accepts by one account at the same moment, and a used single-use link is refused before the consent page."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Participation
from annotation.services.participation import invitation_create_bulk, invitation_join
from tests.annotation.factories import StudyFactory, UserFactory


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
