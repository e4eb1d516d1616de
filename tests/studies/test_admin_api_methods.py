"""A method an admin API view does not offer (DELETE on a study, PUT on its members) is a 405 in the API's
error shape for everyone, before the model permissions are asked; the methods it offers keep their refusals."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from studies.models import Study
from tests.annotation.factories import StudyFactory

pytestmark = pytest.mark.django_db


def _client(user=None) -> APIClient:  # type: ignore[no-untyped-def]
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


@pytest.fixture
def callers() -> dict[str, APIClient]:
    users = get_user_model().objects
    return {
        "superuser": _client(users.create_superuser("root", "root@example.org", "pw")),
        "plain user": _client(users.create_user("plain")),
        "anonymous": _client(),
    }


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("delete", "/api/v1/admin/studies/s1/"),
        ("delete", "/api/v1/admin/studies/"),
        ("put", "/api/v1/admin/studies/s1/members/"),
        ("delete", "/api/v1/admin/failed-candidates/1/"),
    ],
)
def test_a_method_the_view_does_not_offer_is_405_for_everyone(callers, method, path):
    StudyFactory(slug="s1")
    for who, client in callers.items():
        response = getattr(client, method)(path)
        assert response.status_code == 405, (who, response.content)
        assert response.json() == {"message": f'Method "{method.upper()}" not allowed.', "extra": {}}, who
        assert method.upper() not in response["Allow"], who
    assert Study.objects.filter(slug="s1").exists()


def test_the_methods_a_view_offers_keep_their_permission_refusals(callers):
    StudyFactory(slug="s1", title="Kept")
    refused = callers["plain user"].patch("/api/v1/admin/studies/s1/", {"title": "Changed"}, format="json")
    assert refused.status_code == 403
    assert "lacks the permission" in refused.json()["message"]
    assert callers["anonymous"].patch("/api/v1/admin/studies/s1/", {"title": "Changed"}, format="json").status_code in (
        401,
        403,
    )
    assert callers["plain user"].options("/api/v1/admin/studies/s1/members/").status_code == 403
    assert Study.objects.get(slug="s1").title == "Kept"
