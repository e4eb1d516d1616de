"""Headers and limits (docs/permissions.md, "Headers and limits"; docs/api.md, "Request rates"): every page and
endpoint carries the Content-Security-Policy, a research report opened in the browser its own sandboxed one, no
template or page code carries an inline script or style, and the API answers 429 with Retry-After past its
rates, counted per account (per client address when signed out) in the cache every process shares.

The pages are the permission matrix's (tests/security/test_permission_matrix.py), which has a row for every
route of the URLconf; the browser journeys (tests/e2e) fail on any violation the policy reports."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tokenize
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client
from rest_framework.test import APIClient

from tests.conftest import require
from tests.security.conftest import ROLES
from tests.security.test_permission_matrix import ADMIN, API, PAGES

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]

# The site's policy as docs/permissions.md writes it: the site's own files only, nothing inline.
SITE_POLICY = {
    "default-src": {"'none'"},
    "script-src": {"'self'"},
    "style-src": {"'self'"},
    "img-src": {"'self'", "data:"},
    "font-src": {"'self'"},
    "connect-src": {"'self'"},
    "manifest-src": {"'self'"},
    "form-action": {"'self'"},
    "frame-ancestors": {"'none'"},
    "base-uri": {"'none'"},
    "object-src": {"'none'"},
}
# A report or figure shown in the browser: sandboxed, no script, nothing loaded, its own inline styles.
RESEARCH_FILE_POLICY = {
    "default-src": {"'none'"},
    "style-src": {"'unsafe-inline'"},
    "img-src": {"data:"},
    "form-action": {"'none'"},
    "frame-ancestors": {"'none'"},
    "base-uri": {"'none'"},
    "sandbox": {"allow-scripts"},  # an opaque origin; default-src 'none' still refuses every script
}


def policy(response: Any) -> dict[str, set[str]]:
    header = response.get("Content-Security-Policy")
    assert header, f"no Content-Security-Policy on {response.status_code} {response.get('Content-Type')}"
    directives = [part.split() for part in header.split(";") if part.strip()]
    return {name: set(values) for name, *values in directives}


def _call(user: Any, method: str, url: str, body: dict[str, Any] | None) -> Any:
    client = Client()
    if user is not None:
        client.force_login(user)
    if url.startswith("/api/"):
        return client.generic(method, url, json.dumps(body or {}), content_type="application/json")
    return client.post(url, body or {}) if method == "POST" else client.get(url)


def test_every_page_and_endpoint_carries_the_policy(world):
    """Each row of the permission matrix (every route of the URLconf, and a sample of the admin's), signed out
    and as the first account that gets through: redirects, refusals and 404s carry the policy as pages do."""
    values = world.values()
    wrong = []
    checked = 0
    for method, _route, url_template, body, statuses in [*API, *PAGES, *ADMIN]:
        url = url_template.format(**values)
        let_in = next((role for role, status in zip(ROLES, statuses, strict=True) if status < 300), "admin")
        for role in dict.fromkeys(("anonymous", let_in)):
            with transaction.atomic():
                response = _call(world.users[role], method, url, body)
                transaction.set_rollback(True)
            checked += 1
            got = policy(response) if response.get("Content-Security-Policy") else None
            if got != SITE_POLICY:
                wrong.append(f"{method} {url} as {role} ({response.status_code}): {got}")
    assert checked > 2 * len(PAGES)
    assert not wrong, "\n".join(wrong)


def test_error_pages_carry_the_policy(world):
    client = Client(enforce_csrf_checks=True)
    for response in (
        client.get("/no-such-page/"),  # Django's 404 page
        client.get("/api/v1/no-such-endpoint/"),  # the API's JSON 404
        client.delete(f"/api/v1/admin/studies/{world.study.slug}/"),  # signed out: refused
        client.post("/accounts/login/", {"username": "x", "password": "y"}),  # no CSRF token: Django's 403 page
    ):
        assert response.status_code >= 400
        assert policy(response) == SITE_POLICY, response.status_code


def test_a_report_opened_in_the_browser_is_sandboxed_with_its_own_styles(world):
    """The report runs no script and loads nothing; it keeps its inline styles (matplotlib's SVG needs them).
    Downloaded, it is a file, under the site's policy like any other download."""
    client = Client()
    client.force_login(world.users["researcher_member"])
    shown = client.get(f"/research/jobs/{world.report.pk}/files/report.html")
    assert shown.status_code == 200 and shown["Content-Type"].startswith("text/html")
    assert b"Win rate" in b"".join(shown.streaming_content)
    assert policy(shown) == RESEARCH_FILE_POLICY
    downloaded = client.get(f"/research/jobs/{world.report.pk}/files/report.html?download=1")
    assert downloaded.status_code == 200 and downloaded["Content-Disposition"].startswith("attachment")
    assert policy(downloaded) == SITE_POLICY
    # Not found: the site's 404 page, under the site's policy (its stylesheet and script are the site's files).
    missing = client.get(f"/research/jobs/{world.report.pk}/files/nothing.html")
    assert missing.status_code == 404 and policy(missing) == SITE_POLICY


# Inline code the policy refuses: a <script> with a body, a <style> element, a style= attribute, an on...= handler.
INLINE = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>|<style\b|\sstyle=|\son[a-z]+=", re.IGNORECASE)
# Files that write HTML only for the research file policy above (reports and figures shown sandboxed).
REPORT_WRITERS = ("analysis/report/", "scoring/stress/report.py")


def _html_bearing(path: Path) -> list[tuple[int, str]]:
    """A template's lines; a module's string literals (not its comments), with the line each starts on."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return list(enumerate(text.splitlines(), 1))
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return [(token.start[0], token.string) for token in tokens if token.type == tokenize.STRING]


def test_no_template_or_page_code_carries_an_inline_script_or_style():
    """What the browser journeys would find on the pages they visit, checked for every template and every
    module that writes HTML, so a page no journey opens is held to the policy too."""
    files = [*REPO.glob("templates/**/*.html")]
    for package in ("annotation", "analysis", "corpus", "scoring", "kernel", "config"):
        files += [p for p in (REPO / package).rglob("*.py") if "migrations" not in p.parts]
    assert len(files) > 50
    found = []
    for path in files:
        name = path.relative_to(REPO).as_posix()
        if name.startswith(REPORT_WRITERS):
            continue
        for number, text in _html_bearing(path):
            if INLINE.search(text):
                found.append(f"{name}:{number}: {text.strip()[:120]}")
    assert not found, "inline script or style (static/js and static/css instead):\n" + "\n".join(found)


def test_the_inline_check_finds_what_it_is_meant_to_find():
    for bad in ("<script>alert(1)</script>", "<style>p{}</style>", '<p style="color:red">', '<a onclick="x()">'):
        assert INLINE.search(bad), bad
    for good in ('<script src="/static/js/app.js" defer></script>', '<p class="x">', "data-select-on-click"):
        assert not INLINE.search(good), good


# --- request rates ------------------------------------------------------------------------------------------

LOW_RATES = {"annotator": "3/minute", "research": "3/minute", "admin": "3/minute"}


@pytest.fixture
def low_rates(settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": LOW_RATES}


def _token_client(user: Any) -> APIClient:
    from rest_framework.authtoken.models import Token

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def _past_the_rate(response: Any) -> None:
    """A 429 that says when to come back, in the header and in the API's error body."""
    assert response.status_code == 429, response.content
    wait = int(response["Retry-After"])
    assert 1 <= wait <= 60
    body = response.json()
    assert body["message"].startswith("Request was throttled.") and body["extra"] == {"retry_after_s": wait}


def test_each_api_answers_429_past_its_rate_per_account(world, low_rates):
    annotator = _token_client(world.users["annotator"])
    assert [annotator.get("/api/v1/participations/").status_code for _ in range(3)] == [200] * 3
    _past_the_rate(annotator.get(f"/api/v1/participations/{world.participation.pk}/"))
    # Another annotator has a rate of their own.
    assert _token_client(world.users["other_annotator"]).get("/api/v1/participations/").status_code == 200

    researcher = _token_client(world.users["researcher_member"])
    jobs = f"/api/v1/research/studies/{world.study.slug}/jobs/"
    assert [researcher.get(jobs).status_code for _ in range(3)] == [200] * 3
    _past_the_rate(researcher.get(f"/api/v1/research/jobs/{world.export.pk}/"))
    # The admin API is counted apart: the researcher's research requests did not use it up.
    assert [researcher.get("/api/v1/admin/studies/").status_code for _ in range(3)] == [200] * 3
    _past_the_rate(researcher.get("/api/v1/admin/studies/"))


def test_a_caller_not_signed_in_is_counted_by_address_whatever_x_forwarded_for_says(world, low_rates):
    """Accepting an invitation needs no account: the count is the client address's (TRUSTED_PROXY_COUNT=0: the
    socket's), so a client cannot start afresh by writing a new X-Forwarded-For on each request."""
    url = "/api/v1/invitations/no-such-invitation/accept/"
    address = f"caller-{uuid.uuid4().hex}"  # only a REMOTE_ADDR string: no traffic goes anywhere
    client = APIClient()
    answers = [
        client.post(url, {"consent": True}, format="json", REMOTE_ADDR=address, HTTP_X_FORWARDED_FOR=f"198.51.100.{n}")
        for n in range(3)
    ]
    assert [a.status_code for a in answers] == [404] * 3
    _past_the_rate(client.post(url, {"consent": True}, format="json", REMOTE_ADDR=address, HTTP_X_FORWARDED_FOR="x"))
    other = client.post(url, {"consent": True}, format="json", REMOTE_ADDR=f"other-{uuid.uuid4().hex}")
    assert other.status_code == 404


CHILD = r"""
import json, sys, django
django.setup()
from django.test import Client
client = Client()
url = "/api/v1/invitations/no-such-invitation/accept/"
print(json.dumps([
    client.post(url, {"consent": True}, content_type="application/json", REMOTE_ADDR=sys.argv[1]).status_code
    for _ in range(3)
]))
"""


def test_the_rate_is_counted_across_processes_in_the_shared_cache(settings):
    """Another process (a second web worker) uses up a client's rate in the Redis cache; this process then
    refuses that client, and only that client."""
    redis_url = os.environ.get("CELERY_BROKER_URL", "")
    require(redis_url.startswith("redis://"), "needs the test Redis (CELERY_BROKER_URL=redis://...)")
    db = connection.settings_dict
    database_url = f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"
    address = f"cross-process-{uuid.uuid4().hex}"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": database_url,
        "CACHE_URL": redis_url,
        "API_THROTTLE_ANNOTATOR": "3/minute",
    }
    child = subprocess.run(
        [sys.executable, "-c", CHILD, address], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert child.returncode == 0, child.stderr[-2000:]
    assert json.loads(child.stdout.strip().splitlines()[-1]) == [404] * 3

    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": redis_url}}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": LOW_RATES}
    from django.core.cache import cache

    try:
        url = "/api/v1/invitations/no-such-invitation/accept/"
        client = APIClient()
        _past_the_rate(client.post(url, {"consent": True}, format="json", REMOTE_ADDR=address))
        assert client.post(url, {"consent": True}, format="json", REMOTE_ADDR=f"{address}-b").status_code == 404
    finally:
        cache.delete_many([f"throttle_annotator_{address}", f"throttle_annotator_{address}-b"])


def test_every_api_view_names_a_scope_with_a_rate():
    """A new API view without a throttle_scope would have no rate: each one under /api/v1/ names a scope that
    the settings give a rate to."""
    from django.conf import settings
    from django.urls import URLPattern, URLResolver, get_resolver

    def views(patterns: list[Any], prefix: str = "") -> list[tuple[str, Any]]:
        found: list[tuple[str, Any]] = []
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                found += views(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern) and route.startswith("api/v1/"):
                found.append((route, getattr(pattern.callback, "cls", None)))
        return found

    api_views = views(get_resolver().url_patterns)
    assert len(api_views) > 20
    scopes = set(settings.API_THROTTLE_RATES)
    unscoped = [
        route
        for route, view in api_views
        if view is not None and view.__module__.split(".")[0] in ("annotation", "analysis")
        if getattr(view, "throttle_scope", None) not in scopes
    ]
    assert not unscoped, unscoped
