"""The admin study API answers every malformed setting, design and invitation with a 400 naming the field,
and saves nothing (the cases the fuzzer and the tracker found: issue 11)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from kernel.exceptions import ApplicationError
from studies.models import Invitation, Study, StudySystem
from studies.services.invitation import invitation_create_bulk
from studies.services.study import study_create, study_update
from tests.annotation.factories import StudyFactory

pytestmark = pytest.mark.django_db

SYSTEMS = [
    {"label": "centroid-p", "model_name": "extractive-centroid", "condition": "persona"},
    {"label": "centroid-g", "model_name": "extractive-centroid", "condition": "generic"},
    {"label": "mmr-p", "model_name": "extractive-mmr", "condition": "persona"},
    {"label": "mmr-g", "model_name": "extractive-mmr", "condition": "generic"},
]


@pytest.fixture
def api():
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_superuser("root", "root@example.org", "pw"))
    return client


def _fields(response) -> dict:  # type: ignore[no-untyped-def]
    assert response.status_code == 400, response.content
    return response.json()["extra"]["fields"]


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"queries_per_annotator": 0}, "queries_per_annotator", "Queries per annotator must be from 1 to 1000."),
        ({"queries_per_annotator": 70_000}, "queries_per_annotator", "Queries per annotator must be from 1 to 1000."),
        ({"max_query_chars": 0}, "max_query_chars", "Max query chars must be from 1 to 20000."),
        ({"max_query_chars": 2**40}, "max_query_chars", "Max query chars must be from 1 to 20000."),
        ({"retrieval_k": 0}, "retrieval_k", "Retrieval k must be from 1 to 100."),
        ({"retrieval_k": "ten"}, "retrieval_k", "A valid integer is required."),
        ({"retrieval_settings": [1, 2]}, "retrieval_settings", "must be a JSON object"),
        ({"retrieval_settings": "fast"}, "retrieval_settings", "must be a JSON object"),
        ({"retrieval_settings": None}, "retrieval_settings", "may not be null"),
        ({"prompt_template": 2**40}, "prompt_template", "does not exist"),
    ],
)
def test_a_bad_study_setting_is_400_naming_the_field(api, change, field, message):
    response = api.post("/api/v1/admin/studies/", {"slug": "new", "title": "New", **change}, format="json")
    assert message in " ".join(map(str, _fields(response)[field]))
    assert not Study.objects.filter(slug="new").exists()


@pytest.mark.parametrize(
    ("systems", "message"),
    [
        ([{**SYSTEMS[0], "order": 70_000}, *SYSTEMS[1:]], "less than or equal to 32767"),
        ([{**SYSTEMS[0], "order": -1}, *SYSTEMS[1:]], "greater than or equal to 0"),
        ([{**SYSTEMS[0], "id": None}, *SYSTEMS[1:]], "may not be null"),
        ([{**SYSTEMS[0], "id": 2**40}, *SYSTEMS[1:]], "System 1099511627776 is not one of this study's systems"),
        ([SYSTEMS[0], {**SYSTEMS[1], "label": "centroid-p"}], "Two systems are labelled 'centroid-p'"),
        ([SYSTEMS[0], {**SYSTEMS[0], "label": "other"}], "each design cell appears once"),
        ([{**SYSTEMS[0], "backend_settings": [1]}, *SYSTEMS[1:]], "backend settings must be a JSON object"),
        (None, "may not be null"),
    ],
)
def test_a_bad_design_is_400_on_systems_and_nothing_is_saved(api, systems, message):
    response = api.post("/api/v1/admin/studies/", {"slug": "new", "title": "New", "systems": systems}, format="json")
    assert message in str(_fields(response)["systems"])
    assert not Study.objects.filter(slug="new").exists() and not StudySystem.objects.exists()


def test_patch_with_systems_replaces_the_list_and_refuses_what_create_refuses(api):
    StudyFactory(slug="draft", status=Study.Status.DRAFT)
    stored = api.get("/api/v1/admin/studies/draft/").json()["systems"]
    duplicate = api.patch(
        "/api/v1/admin/studies/draft/",
        {"systems": [stored[0], {**stored[1], "label": stored[0]["label"]}]},
        format="json",
    )
    assert "labels must differ" in _fields(duplicate)["systems"][0]
    unknown = api.patch("/api/v1/admin/studies/draft/", {"systems": [{"id": 2**40, "label": "x"}]}, format="json")
    assert "is not one of this study's systems" in _fields(unknown)["systems"][0]
    null_id = api.patch("/api/v1/admin/studies/draft/", {"systems": [{"id": None, "label": "x"}]}, format="json")
    assert "may not be null" in str(_fields(null_id)["systems"])
    assert StudySystem.objects.filter(study__slug="draft").count() == 4
    # The documented meaning: the list given is the whole design; a system named by id keeps what is left out.
    kept = api.patch(
        "/api/v1/admin/studies/draft/", {"systems": [{"id": stored[0]["id"], "order": 9}, stored[1]]}, format="json"
    )
    assert kept.status_code == 200, kept.json()
    assert [(s["label"], s["order"]) for s in kept.json()["systems"]] == [
        (stored[1]["label"], 1),
        (stored[0]["label"], 9),
    ]


def test_an_invitation_beyond_the_database_integer_is_400(api):
    StudyFactory(slug="inv")
    response = api.post("/api/v1/admin/studies/inv/invitations/", {"count": 1, "max_uses": 2**31}, format="json")
    assert "less than or equal to 2147483647" in _fields(response)["max_uses"][0]
    assert not Invitation.objects.exists()
    largest = api.post("/api/v1/admin/studies/inv/invitations/", {"count": 1, "max_uses": 2**31 - 1}, format="json")
    assert largest.status_code == 201 and largest.json()[0]["max_uses"] == 2**31 - 1


def test_a_status_of_null_is_400(api):
    StudyFactory(slug="st")
    assert (
        "may not be null"
        in _fields(api.post("/api/v1/admin/studies/st/status/", {"status": None}, format="json"))["status"][0]
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ([1], "Retrieval settings must be a JSON object."),
        ({"filter": "a\x00b"}, "Retrieval settings.filter contains a NUL character (\\u0000)."),
        ({"boost": float("inf")}, "Retrieval settings.boost is inf, which JSON cannot store."),
    ],
)
def test_the_service_refuses_unstorable_settings_for_every_caller(settings, message):
    # The Django admin's form reaches the service without the API's parser.
    with pytest.raises(ApplicationError) as refused:
        study_create(slug="svc", title="Svc", retrieval_settings=settings)
    assert (refused.value.message, refused.value.field) == (message, "retrieval_settings")
    study = StudyFactory(slug="svc2", status=Study.Status.DRAFT)
    with pytest.raises(ApplicationError):
        study_update(study=study, retrieval_settings=settings)
    with pytest.raises(ApplicationError) as refused:
        study_update(study=study, systems=[{**SYSTEMS[0], "backend_settings": settings}])
    assert refused.value.field == "systems"
    assert not Study.objects.filter(slug="svc").exists()


def test_the_admin_invitation_form_refuses_uses_beyond_the_database_integer(client):
    # The Django admin's "Create invitations" page: its form and the service both bound max_uses (a 500 before).
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.org", "pw"))
    study = StudyFactory(slug="inv-admin")
    url = f"/admin/studies/study/{study.pk}/invitations/"
    refused = client.post(url, {"count": 1, "max_uses": 2**63})
    assert refused.status_code == 200
    assert "Ensure this value is less than or equal to 2147483647." in refused.content.decode()
    assert not Invitation.objects.exists()
    with pytest.raises(ApplicationError, match="at most 2147483647 uses"):
        invitation_create_bulk(study=study, count=1, max_uses=2**31)
    assert client.post(url, {"count": 1, "max_uses": 2**31 - 1}).status_code == 200
    assert Invitation.objects.get().max_uses == 2**31 - 1
