"""Input PostgreSQL cannot store, or Python cannot walk, is a 400 naming the problem at every edge.

NUL characters in a path, query string, header or cookie (kernel.middleware); a JSON body nested too deep,
with a NUL or lone surrogate in a string or key, or a number beyond a float (kernel.parsers).
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from rest_framework.test import APIClient

from analysis.models import ResearchJob
from analysis.permissions import RESEARCHERS_GROUP
from annotation.models import Participation
from kernel.storable import MAX_JSON_DEPTH, json_problem, unstorable_text
from studies.models import Invitation, Study, StudyMembership
from studies.services.invitation import invitation_create_bulk
from studies.services.membership import membership_set
from tests.annotation.factories import StudyFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def study():
    return StudyFactory(slug="hostile")


def _researcher(study: Study) -> APIClient:
    """A researcher member of the study (docs/permissions.md)."""
    user = get_user_model().objects.create_user("researcher")
    user.groups.add(Group.objects.get_or_create(name=RESEARCHERS_GROUP)[0])
    membership_set(study=study, user=user, role=StudyMembership.Role.RESEARCHER)
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.mark.parametrize(
    "url",
    [
        "/join/abc%00def/",  # an HTML page that looks the token up
        "/api/v1/invitations/abc%00def/accept/",
        "/api/v1/admin/studies/hostile%00/",
        "/research/studies/hostile%00/",
        "/api/v1/admin/failed-candidates/?study=a%00b",
        "/join/abc/?next=%00",
    ],
)
def test_a_nul_in_the_path_or_query_string_is_400_naming_the_part(study, url):
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("root", "root@example.org", "x"))
    response = admin.get(url)
    assert response.status_code == 400
    part = "query parameter" if "?" in url else "address"
    assert f"{part}" in response.content.decode() and "NUL" in response.content.decode()
    if url.startswith("/api/"):
        assert response.json()["message"].startswith(f"The {part}")


def test_a_nul_in_an_api_token_or_session_cookie_is_400_not_a_lookup(study):
    response = APIClient().get("/api/v1/participations/", HTTP_AUTHORIZATION="Token abc\x00def")
    assert response.status_code == 400 and "Authorization header" in response.json()["message"]
    response = Client().get("/join/whatever/", HTTP_COOKIE="sessionid=abc\x00def")
    assert response.status_code == 400 and b"Cookie header" in response.content


def test_a_json_body_nested_past_the_limit_is_400_and_joins_nobody(study):
    token = invitation_create_bulk(study=study, count=1)[0].token
    deep = "[" * 100_000 + "]" * 100_000  # past Python's recursion limit: a RecursionError before
    response = APIClient().post(f"/api/v1/invitations/{token}/accept/", deep, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["message"] == f"JSON parse error - nested more than {MAX_JSON_DEPTH} levels deep."
    just_past = {"consent": True, "x": json.loads("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)}
    response = APIClient().post(f"/api/v1/invitations/{token}/accept/", just_past, format="json")
    assert response.status_code == 400 and "body.x" in response.json()["message"]
    assert not Participation.objects.exists()
    within = {"consent": True, "x": json.loads("[" * (MAX_JSON_DEPTH - 2) + "]" * (MAX_JSON_DEPTH - 2))}
    assert APIClient().post(f"/api/v1/invitations/{token}/accept/", within, format="json").status_code == 201


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ('{"consent": true, "note": "a\\u0000b"}', "body.note contains a NUL character"),
        ('{"consent": true, "a\\u0000": 1}', "a key of body contains a NUL character"),
        ('{"consent": true, "note": "\\ud800"}', "body.note contains a lone surrogate (\\ud800)"),
        ('{"consent": true, "n": [1, 1e400]}', "body.n[1] is inf"),
    ],
)
def test_unstorable_json_is_400_naming_where_it_is(study, raw, named):
    token = invitation_create_bulk(study=study, count=1)[0].token
    response = APIClient().post(f"/api/v1/invitations/{token}/accept/", raw, content_type="application/json")
    assert response.status_code == 400
    assert named in response.json()["message"]
    assert Invitation.objects.get(token=token).uses == 0


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"filters": {"model": "a\x00b"}}, "body.options.filters.model contains a NUL character"),
        ({"\x00": 1}, "a key of body.options contains a NUL character"),
    ],
)
def test_research_job_options_that_jsonb_cannot_store_are_400(study, options, named):
    client = _researcher(study)
    response = client.post(
        "/api/v1/research/studies/hostile/jobs/", {"kind": "export", "options": options}, format="json"
    )
    assert response.status_code == 400 and named in response.json()["message"]
    assert not ResearchJob.objects.exists()


def test_job_options_serializer_refuses_what_jsonb_cannot_store_without_the_parser():
    from analysis.api.views import JobCreateSerializer

    body = JobCreateSerializer(data={"kind": "export", "options": {"seed": float("inf"), "note": "a\x00"}})
    assert not body.is_valid()
    assert body.errors["options"][0].startswith("Options.")


def test_storable_checks_name_the_place():
    assert unstorable_text("plain text, é, 漢字, 🙂") is None
    assert json_problem({"a": [1, 2.5, "x", None, True, {"b": "ok"}]}) is None
    assert json_problem({"a": [{"b": "\x00"}]}, where="options") == "options.a[0].b contains a NUL character (\\u0000)"
    assert json_problem(float("nan")) == "the value is nan, which JSON cannot store"
    nested: list = []
    for _ in range(MAX_JSON_DEPTH):
        nested = [nested]
    assert json_problem(nested) == f"the value{'[0]' * MAX_JSON_DEPTH} is nested more than {MAX_JSON_DEPTH} levels deep"


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/queries/99999999999999999999/",
        "/api/v1/matches/9223372036854775808/",
        "/api/v1/admin/failed-candidates/99999999999999999999/",
        "/api/v1/research/jobs/99999999999999999999/",
        "/research/jobs/99999999999999999999/status/",
        "/study/hostile/q/99999999999999999999/wait/",
        "/api/v1/queries/12abc/",
        "/api/v1/participations/-1/",
    ],
)
def test_ids_past_the_database_range_or_not_numbers_are_not_found(study, url):
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("root", "root@example.org", "x"))
    assert admin.get(url).status_code == 404


def test_the_django_admin_treats_a_huge_id_as_missing(study):
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("root", "root@example.org", "x"))
    response = admin.get("/admin/studies/study/99999999999999999999/change/")
    assert response.status_code == 302  # back to the list, with "does not exist" in the messages


def test_a_nul_in_a_page_form_is_a_form_error_and_nothing_is_asked(study):
    from tests.annotation.factories import join

    participation = join(study)
    client = Client()
    client.force_login(participation.annotator)
    response = client.post(f"/study/{study.slug}/ask/", {"text": "shift work\x00 and sleep", "client_token": "t1"})
    assert response.status_code == 400 and "Null characters are not allowed" in response.content.decode()
    assert not participation.queries.exists()


def test_a_nul_in_the_research_pages_job_form_is_a_message_and_no_job(study):
    # The page passes its form's values to the service as they came (the API's serializer is not in the way).
    user = get_user_model().objects.create_user("page-researcher")
    user.groups.add(Group.objects.get_or_create(name=RESEARCHERS_GROUP)[0])
    membership_set(study=study, user=user, role=StudyMembership.Role.RESEARCHER)
    browser = Client()
    browser.force_login(user)
    posted = browser.post(
        "/research/studies/hostile/jobs/",
        {"kind": "stress", "tests": ["distractor"], "metrics": ["rouge1\x00"]},
        follow=True,
    )
    assert posted.status_code == 200
    assert "Options.metrics[0] contains a NUL character" in posted.content.decode()
    assert not ResearchJob.objects.exists()
