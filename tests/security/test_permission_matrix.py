"""Every API endpoint and page, for every kind of account: the status each gets, written from
docs/permissions.md (a literal table, not computed by the code under test). A new endpoint or page
without a row here fails `test_every_endpoint_and_page_has_a_row`.

Each cell runs in its own rolled-back transaction, so no request changes what the next one sees."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.generators import SchemaGenerator

from studies.models_audit import StudyAuditLog
from tests.security.conftest import ROLES

pytestmark = pytest.mark.django_db

# Columns, in ROLES order:
#  anonymous, annotator, other annotator, plain user, staff without permissions, researcher member,
#  researcher non-member, viewer member, owner member, admin (superuser).
Row = tuple[str, str, str, dict[str, Any] | None, tuple[int, ...]]

ANYONE_200 = (200,) * 10
SIGNED_IN_200 = (403,) + (200,) * 9
# The annotator's own data: nobody else, superusers included, sees it (404).
OWN_PAGE = lambda mine: (302, mine, 404, 404, 404, 404, 404, 404, 404, 404)  # noqa: E731
OWN_API = lambda mine: (403, mine, 404, 404, 404, 404, 404, 404, 404, 404)  # noqa: E731
# Research pages (signed out: to the sign-in page) and the research API (signed out: 403).
R_PAGE_LIST = (302, 403, 403, 403, 403, 200, 200, 200, 200, 200)
R_PAGE_SEE = (302, 403, 403, 403, 403, 200, 404, 200, 200, 200)
R_PAGE_ANALYSE = lambda ok: (302, 403, 403, 403, 403, ok, 404, 403, ok, ok)  # noqa: E731
R_API_SEE = (403, 403, 403, 403, 403, 200, 404, 200, 200, 200)
R_API_ANALYSE = lambda ok: (403, 403, 403, 403, 403, ok, 404, 403, ok, ok)  # noqa: E731
# Admin API: the model permission first (403), then the membership (404 not a member, 403 role too low).
A_API_SEE = (403, 403, 403, 403, 403, 200, 404, 200, 200, 200)
A_API_ANALYSE = (403, 403, 403, 403, 403, 200, 404, 403, 200, 200)
A_API_LIST = (403, 403, 403, 403, 403, 200, 200, 200, 200, 200)
A_API_MANAGE = lambda ok: (403, 403, 403, 403, 403, 403, 403, 403, ok, ok)  # noqa: E731

STUDY = "/api/v1/admin/studies/{slug}/"
FAILED = "/api/v1/admin/failed-candidates/{candidate}/"
# (method, the route as the URLconf or the OpenAPI schema names it, the URL, the body, statuses)
API: list[Row] = [
    (
        "POST",
        "/api/v1/invitations/{token}/accept/",
        "/api/v1/invitations/{token}/accept/",
        {"consent": True},
        (201, 200, 201, 201, 201, 201, 201, 201, 201, 201),
    ),
    ("GET", "/api/v1/participations/", "/api/v1/participations/", None, SIGNED_IN_200),
    ("GET", "/api/v1/participations/{id}/", "/api/v1/participations/{participation}/", None, OWN_API(200)),
    # The matrix's study asks no screening question: the owner's answer is a 409 saying so.
    (
        "POST",
        "/api/v1/participations/{id}/screening/",
        "/api/v1/participations/{participation}/screening/",
        {"answer": "Yes"},
        OWN_API(409),
    ),
    (
        "PUT",
        "/api/v1/participations/{id}/persona/",
        "/api/v1/participations/{participation}/persona/",
        {"role": "nurse", "domain": "icu", "expertise": "expert", "use_case": "rotas"},
        OWN_API(409),
    ),
    (
        "POST",
        "/api/v1/participations/{id}/queries/",
        "/api/v1/participations/{participation}/queries/",
        {"text": "sleep and shift work"},
        OWN_API(201),
    ),
    (
        "POST",
        "/api/v1/participations/{id}/finish/",
        "/api/v1/participations/{participation}/finish/",
        None,
        OWN_API(200),
    ),
    # A new resume link for the participant's own participation (docs/crowd.md); the old one stops working.
    (
        "POST",
        "/api/v1/participations/{id}/resume-link/",
        "/api/v1/participations/{participation}/resume-link/",
        None,
        OWN_API(200),
    ),
    # A live study has no pre-written items (docs/backends.md, "Pre-written studies"): its owner gets 409.
    (
        "POST",
        "/api/v1/participations/{id}/next-item/",
        "/api/v1/participations/{participation}/next-item/",
        {"client_token": "matrix"},
        OWN_API(409),
    ),
    ("GET", "/api/v1/queries/{id}/", "/api/v1/queries/{query}/", None, OWN_API(200)),
    ("GET", "/api/v1/queries/{id}/current-match/", "/api/v1/queries/{query}/current-match/", None, OWN_API(204)),
    ("POST", "/api/v1/queries/{id}/retry/", "/api/v1/queries/{query}/retry/", None, OWN_API(200)),
    ("POST", "/api/v1/queries/{id}/discard/", "/api/v1/queries/{query}/discard/", None, OWN_API(409)),
    ("GET", "/api/v1/matches/{id}/", "/api/v1/matches/{match}/", None, OWN_API(200)),
    ("POST", "/api/v1/matches/{id}/choice/", "/api/v1/matches/{match}/choice/", {"choice": "left"}, OWN_API(200)),
    ("GET", "/api/v1/admin/studies/", "/api/v1/admin/studies/", None, A_API_LIST),
    (
        "POST",
        "/api/v1/admin/studies/",
        "/api/v1/admin/studies/",
        {"slug": "new-one", "title": "New"},
        A_API_MANAGE(201),
    ),
    ("GET", "/api/v1/admin/studies/{slug}/", STUDY, None, A_API_SEE),
    ("PUT", "/api/v1/admin/studies/{slug}/", STUDY, {"slug": "matrix", "title": "Renamed"}, A_API_MANAGE(200)),
    ("PATCH", "/api/v1/admin/studies/{slug}/", STUDY, {"title": "Renamed"}, A_API_MANAGE(200)),
    ("POST", "/api/v1/admin/studies/{slug}/status/", STUDY + "status/", {"status": "paused"}, A_API_MANAGE(200)),
    ("GET", "/api/v1/admin/studies/{slug}/invitations/", STUDY + "invitations/", None, A_API_ANALYSE),
    ("POST", "/api/v1/admin/studies/{slug}/invitations/", STUDY + "invitations/", {"count": 1}, A_API_MANAGE(201)),
    ("GET", "/api/v1/admin/studies/{slug}/progress/", STUDY + "progress/", None, A_API_SEE),
    ("GET", "/api/v1/admin/studies/{slug}/members/", STUDY + "members/", None, A_API_ANALYSE),
    (
        "POST",
        "/api/v1/admin/studies/{slug}/members/",
        STUDY + "members/",
        {"username": "plain", "role": "viewer"},
        A_API_MANAGE(200),
    ),
    (
        "DELETE",
        "/api/v1/admin/studies/{slug}/members/{username}/",
        STUDY + "members/viewer/",
        None,
        A_API_MANAGE(204),
    ),
    (
        "POST",
        "/api/v1/admin/studies/{slug}/participations/{code}/exclusion/",
        STUDY + "participations/{code}/exclusion/",
        {"reason": "too fast"},
        A_API_ANALYSE,
    ),
    # Importing pre-written outputs: the study's owners (an empty file is refused, 400, after the permissions).
    ("POST", "/api/v1/admin/studies/{slug}/outputs/", STUDY + "outputs/", {"content": ""}, A_API_MANAGE(400)),
    # The audit log: owners and researchers of the study, with the view permission of the log.
    ("GET", "/api/v1/admin/studies/{slug}/audit/", STUDY + "audit/", None, A_API_ANALYSE),
    # The open link is shown to those who may list invitations.
    ("GET", "/api/v1/admin/studies/{slug}/open-link/", STUDY + "open-link/", None, A_API_ANALYSE),
    ("GET", "/api/v1/admin/failed-candidates/", "/api/v1/admin/failed-candidates/", None, A_API_LIST),
    ("GET", "/api/v1/admin/failed-candidates/{id}/", FAILED, None, (403, 403, 403, 403, 403, 200, 404, 404, 200, 200)),
    ("POST", "/api/v1/admin/failed-candidates/{id}/retry/", FAILED + "retry/", None, A_API_MANAGE(200)),
    (
        "POST",
        "/api/v1/admin/failed-candidates/retry-all/",
        "/api/v1/admin/failed-candidates/retry-all/",
        None,
        A_API_MANAGE(200),
    ),
    (
        "GET",
        "/api/v1/research/studies/{slug}/comparisons/",
        "/api/v1/research/studies/{slug}/comparisons/",
        None,
        R_API_SEE,
    ),
    ("GET", "/api/v1/research/studies/{slug}/jobs/", "/api/v1/research/studies/{slug}/jobs/", None, R_API_SEE),
    (
        "POST",
        "/api/v1/research/studies/{slug}/jobs/",
        "/api/v1/research/studies/{slug}/jobs/",
        {"kind": "export", "options": {"format": "csv"}},
        R_API_ANALYSE(201),
    ),
    (
        "POST",
        "/api/v1/research/studies/{slug}/scoring-runs/",
        "/api/v1/research/studies/{slug}/scoring-runs/",
        {"metrics": ["rouge1"]},
        R_API_ANALYSE(201),
    ),
    ("GET", "/api/v1/research/jobs/{job_id}/", "/api/v1/research/jobs/{job}/", None, R_API_SEE),
    # Cancel: the fixture's job has finished, so an allowed cancel answers it unchanged.
    ("POST", "/api/v1/research/jobs/{job_id}/cancel/", "/api/v1/research/jobs/{job}/cancel/", None, R_API_ANALYSE(200)),
    (
        "GET",
        "/api/v1/research/jobs/{job_id}/files/{name}",
        "/api/v1/research/jobs/{job}/files/{file}",
        None,
        R_API_ANALYSE(200),
    ),
]

Q1 = "/study/{slug}/q/1/"
PAGES: list[Row] = [
    ("GET", "/", "/", None, ANYONE_200),
    # A fresh invitation: its consent page, except for the annotator already in the study (to the study).
    ("GET", "/join/<str:token>/", "/join/{token}/", None, (200, 302, 200, 200, 200, 200, 200, 200, 200, 200)),
    # An unknown (or disabled) open link is 404 for anyone (docs/crowd.md).
    ("GET", "/open/<str:token>/", "/open/{open_token}/", None, (404,) * 10),
    # A resume link is a bearer secret: whoever opens it continues that participant's participation, while
    # it goes on (tests/annotation/test_crowd_keys.py: an ended one, or a replaced link, opens nothing).
    ("GET", "/resume/<str:token>/", "/resume/{resume_token}/", None, (302,) * 10),
    ("GET", "/study/<slug:slug>/", "/study/{slug}/", None, OWN_PAGE(302)),
    ("GET", "/study/<slug:slug>/screening/", "/study/{slug}/screening/", None, OWN_PAGE(302)),
    # "Replace my resume link": the annotator's own, back to the study's page with the new link.
    ("POST", "/study/<slug:slug>/resume-link/", "/study/{slug}/resume-link/", None, OWN_PAGE(302)),
    # "Preview as annotator": the study's owners and researchers (docs/permissions.md); anyone else 404.
    (
        "GET",
        "/study/<slug:slug>/preview/",
        "/study/{slug}/preview/",
        None,
        (302, 404, 404, 404, 404, 200, 404, 404, 200, 200),
    ),
    ("GET", "/study/<slug:slug>/profile/", "/study/{slug}/profile/", None, OWN_PAGE(200)),
    # The study has no practice round, so its own annotator is sent on to the study.
    ("GET", "/study/<slug:slug>/practice/", "/study/{slug}/practice/", None, OWN_PAGE(302)),
    ("GET", "/study/<slug:slug>/ask/", "/study/{slug}/ask/", None, OWN_PAGE(200)),
    ("GET", "/study/<slug:slug>/q/<int:index>/wait/", Q1 + "wait/", None, OWN_PAGE(302)),
    ("GET", "/study/<slug:slug>/q/<int:index>/status/", Q1 + "status/", None, OWN_PAGE(200)),
    ("POST", "/study/<slug:slug>/q/<int:index>/retry/", Q1 + "retry/", None, OWN_PAGE(302)),
    ("POST", "/study/<slug:slug>/q/<int:index>/discard/", Q1 + "discard/", None, OWN_PAGE(409)),
    ("GET", "/study/<slug:slug>/q/<int:index>/compare/", Q1 + "compare/", None, OWN_PAGE(302)),
    ("GET", "/study/<slug:slug>/stop/", "/study/{slug}/stop/", None, OWN_PAGE(200)),
    ("POST", "/study/<slug:slug>/finish/", "/study/{slug}/finish/", None, OWN_PAGE(302)),
    ("GET", "/study/<slug:slug>/done/", "/study/{slug}/done/", None, OWN_PAGE(302)),
    ("GET", "/research/", "/research/", None, R_PAGE_LIST),
    ("GET", "/research/token/", "/research/token/", None, R_PAGE_LIST),
    ("POST", "/research/token/", "/research/token/", None, (302, 403, 403, 403, 403, 302, 302, 302, 302, 302)),
    ("GET", "/research/studies/<slug:slug>/", "/research/studies/{slug}/", None, R_PAGE_SEE),
    (
        "POST",
        "/research/studies/<slug:slug>/jobs/",
        "/research/studies/{slug}/jobs/",
        {"kind": "export", "format": "csv"},
        R_PAGE_ANALYSE(302),
    ),
    ("GET", "/research/studies/<slug:slug>/report/", "/research/studies/{slug}/report/", None, R_PAGE_ANALYSE(302)),
    (
        "POST",
        "/research/studies/<slug:slug>/participations/<str:code>/exclusion/",
        "/research/studies/{slug}/participations/{code}/exclusion/",
        {"reason": "too fast"},
        R_PAGE_ANALYSE(302),
    ),
    ("GET", "/research/jobs/<int:job_id>/status/", "/research/jobs/{job}/status/", None, R_PAGE_SEE),
    ("POST", "/research/jobs/<int:job_id>/cancel/", "/research/jobs/{job}/cancel/", None, R_PAGE_ANALYSE(302)),
    (
        "GET",
        "/research/jobs/<int:job_id>/files/<path:name>",
        "/research/jobs/{job}/files/{file}",
        None,
        R_PAGE_ANALYSE(200),
    ),
    ("GET", "/research/scoring/<int:run_id>/status/", "/research/scoring/{run}/status/", None, R_PAGE_SEE),
    ("GET", "/accounts/login/", "/accounts/login/", None, ANYONE_200),
    ("POST", "/accounts/logout/", "/accounts/logout/", None, (302,) * 10),
    ("GET", "/healthz/", "/healthz/", None, ANYONE_200),
    ("GET", "/api/schema/", "/api/schema/", None, ANYONE_200),
    ("GET", "/api/docs/", "/api/docs/", None, ANYONE_200),
    # Redoc cannot run under the Content-Security-Policy: its address sends to Swagger UI (config/urls.py).
    ("GET", "/api/redoc/", "/api/redoc/", None, (302,) * 10),
    # The browser's icon: a permanent redirect to the static file, for everyone (issue 33).
    ("GET", "/favicon.ico", "/favicon.ico", None, (301,) * 10),
]

# The Django admin: staff only (others are sent to its sign-in, 302), then model permissions (403), then
# the rows of member studies (another study's change page sends you back to the index, 302). Not every
# admin URL: a sample of each kind of check (tests/annotation/test_admin_pages.py opens every page).
ADMIN: list[Row] = [
    ("GET", "admin index", "/admin/", None, (302, 302, 302, 302, 200, 302, 302, 302, 200, 200)),
    ("GET", "study list", "/admin/studies/study/", None, (302, 302, 302, 302, 403, 302, 302, 302, 200, 200)),
    (
        "GET",
        "own study",
        "/admin/studies/study/{study_pk}/change/",
        None,
        (302, 302, 302, 302, 403, 302, 302, 302, 200, 200),
    ),
    (
        "GET",
        "another study",
        "/admin/studies/study/{other_study_pk}/change/",
        None,
        (302, 302, 302, 302, 403, 302, 302, 302, 302, 200),
    ),
    (
        "GET",
        "invitations",
        "/admin/studies/study/{study_pk}/invitations/",
        None,
        (302, 302, 302, 302, 302, 302, 302, 302, 200, 200),
    ),
    # The audit log: its view permission (the researchers group's), then the rows of member studies.
    (
        "GET",
        "audit log",
        "/admin/studies/studyauditlog/",
        None,
        (302, 302, 302, 302, 403, 302, 302, 302, 200, 200),
    ),
    (
        "GET",
        "invitation list",
        "/admin/studies/invitation/",
        None,
        (302, 302, 302, 302, 403, 302, 302, 302, 200, 200),
    ),
]


def _routes(patterns: list[Any], prefix: str = "") -> list[str]:
    found: list[str] = []
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            found += _routes(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern):
            found.append("/" + route)
    return found


def test_every_endpoint_and_page_has_a_row():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    endpoints = {(method.upper(), path) for path, item in schema["paths"].items() for method in item}
    assert endpoints == {(method, route) for method, route, *_ in API}
    pages = {route for route in _routes(get_resolver().url_patterns) if not route.startswith(("/admin/", "/api/v1/"))}
    assert pages == {route for _, route, *_ in PAGES}


def _call(world, role: str, method: str, url: str, body: dict[str, Any] | None) -> int:
    client = Client()
    user = world.users[role]
    if user is not None:
        client.force_login(user)
    if url.startswith("/api/"):
        response = client.generic(method, url, json.dumps(body or {}), content_type="application/json")
    elif method == "POST":
        response = client.post(url, body or {})
    else:
        response = client.get(url)
    return response.status_code


@pytest.mark.parametrize("table", ["api", "pages", "admin"])
def test_every_role_gets_the_documented_status(world, table):
    rows = {"api": API, "pages": PAGES, "admin": ADMIN}[table]
    values = world.values()
    wrong = []
    for method, route, url_template, body, expected in rows:
        assert len(expected) == len(ROLES), route
        url = url_template.format(**values)
        annotators = (url == "/" or url.startswith(ANNOTATOR_ROUTES)) and not url.endswith("/preview/")
        for role, status in zip(ROLES, expected, strict=True):
            with transaction.atomic():
                logged = StudyAuditLog.objects.count()
                got = _call(world, role, method, url, body)
                audited = StudyAuditLog.objects.count() - logged
                transaction.set_rollback(True)
            if got != status:
                wrong.append(f"{method} {url} as {role}: {got}, documented {status}")
            # The audit log (docs/permissions.md): a refused request changed nothing, so it logs nothing; an
            # annotator's own work is never audited.
            if audited and (got >= 400 or annotators):
                wrong.append(f"{method} {url} as {role}: {got} wrote {audited} audit row(s)")
    assert not wrong, "\n".join(wrong)


# The annotator's routes: whoever calls them, nothing is audited.
ANNOTATOR_ROUTES = (
    "/api/v1/invitations/",
    "/api/v1/participations/",
    "/api/v1/queries/",
    "/api/v1/matches/",
    "/study/",
)
ANNOTATOR_ROUTES += ("/join/", "/open/", "/resume/", "/accounts/", "/healthz/", "/api/schema/", "/api/docs/")
ANNOTATOR_ROUTES += ("/favicon.ico",)
