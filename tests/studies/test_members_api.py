"""Owners staff their study through the admin API as on its admin page: add a member, change a role, end a
membership; the last owner cannot step down, and bad input is a 400 naming the field."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from studies.models import StudyMembership
from tests.annotation.factories import StudyFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner_api():
    study = StudyFactory(slug="staffed")
    owner = get_user_model().objects.create_user("olga", password="pw")
    owner.user_permissions.set(Permission.objects.filter(codename__in=["view_study", "change_study"]))
    StudyMembership.objects.create(study=study, user=owner, role="owner")
    get_user_model().objects.create_user("ravi", password="pw")
    client = APIClient()
    client.force_authenticate(owner)
    return client, study


def test_an_owner_adds_changes_and_removes_a_member(owner_api):
    client, study = owner_api
    url = f"/api/v1/admin/studies/{study.slug}/members/"
    added = client.post(url, {"username": "ravi", "role": "viewer"}, format="json")
    assert added.status_code == 200
    assert added.json() == [{"username": "olga", "role": "owner"}, {"username": "ravi", "role": "viewer"}]
    again = client.post(url, {"username": "ravi", "role": "researcher"}, format="json")  # a role change, not a copy
    assert {m["username"]: m["role"] for m in again.json()} == {"olga": "owner", "ravi": "researcher"}
    assert client.delete(f"{url}ravi/").status_code == 204
    assert client.delete(f"{url}ravi/").status_code == 204  # idempotent
    assert client.get(url).json() == [{"username": "olga", "role": "owner"}]


def test_the_last_owner_stays_and_bad_input_names_the_field(owner_api):
    client, study = owner_api
    url = f"/api/v1/admin/studies/{study.slug}/members/"
    demoted = client.post(url, {"username": "olga", "role": "viewer"}, format="json")
    assert demoted.status_code == 400 and "at least one owner" in demoted.json()["message"]
    assert client.delete(f"{url}olga/").status_code == 400
    unknown = client.post(url, {"username": "nobody", "role": "viewer"}, format="json")
    assert unknown.status_code == 400 and "nobody" in unknown.json()["extra"]["fields"]["username"][0]
    bad_role = client.post(url, {"username": "ravi", "role": "boss"}, format="json")
    assert bad_role.status_code == 400 and "role" in bad_role.json()["extra"]["fields"]
    # With a second owner, the first may step down.
    client.post(url, {"username": "ravi", "role": "owner"}, format="json")
    assert client.post(url, {"username": "olga", "role": "researcher"}, format="json").status_code == 200
    assert StudyMembership.objects.get(study=study, user__username="olga").role == "researcher"
