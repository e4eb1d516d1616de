"""Two owners of a study who each step down at the same moment (two tabs of the admin API): one of them stays
owner and the other is told why, never a study without an owner and never a 500."""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from rest_framework.test import APIClient

from studies.models import StudyMembership
from tests.annotation.factories import StudyFactory

ROUNDS = 12


@pytest.mark.timeout(120)
def test_two_owners_stepping_down_at_once_leave_one_owner(transactional_db: None) -> None:
    permissions = Permission.objects.filter(codename__in=["view_study", "change_study"])
    owners = []
    for name in ("olga", "omar"):
        user = get_user_model().objects.create_user(name, password="pw")
        user.user_permissions.set(permissions)
        owners.append(user)
    for round_number in range(ROUNDS):
        study = StudyFactory(slug=f"shared-{round_number}")
        for user in owners:
            StudyMembership.objects.create(study=study, user=user, role="owner")
        barrier = threading.Barrier(2)
        answers: list[object] = []

        def step_down(
            user: object, slug: str = study.slug, barrier: threading.Barrier = barrier, answers: list = answers
        ) -> None:
            client = APIClient()
            client.force_authenticate(user)
            try:
                barrier.wait()
                answers.append(
                    client.post(
                        f"/api/v1/admin/studies/{slug}/members/",
                        {"username": user.username, "role": "viewer"},  # type: ignore[attr-defined]
                        format="json",
                    )
                )
            except BaseException as error:  # noqa: BLE001 - reported by the main thread
                answers.append(error)
            finally:
                connection.close()

        threads = [threading.Thread(target=step_down, args=(user,)) for user in owners]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        statuses = sorted(str(getattr(a, "status_code", a)) for a in answers)
        assert statuses == ["200", "400"], (round_number, answers)
        refused = next(a for a in answers if a.status_code == 400)  # type: ignore[union-attr]
        assert "keeps at least one owner" in refused.json()["message"]  # type: ignore[union-attr]
        assert StudyMembership.objects.filter(study=study, role="owner").count() == 1, round_number
