"""A PostgreSQL restart while annotators work: real gunicorn (platform/gunicorn.conf.py) on a PostgreSQL server of
the test's own, stopped and started again while requests flow. Before, each request that met the restart was a
raw 500 (20 in 1,716 in the field). Now: no 500; annotator pages get the translated "one moment" page (503,
Retry-After) that tries again by itself, the API a 503 with Retry-After and its error body; afterwards every
worker reaches the database again and no answer or question is stored twice."""

from __future__ import annotations

import re
import threading
import uuid
from collections import Counter
from html import unescape
from typing import Any

import httpx
import psycopg
import pytest

from tests.support.site import Site

pytestmark = [pytest.mark.timeout(900)]

QUESTION = "How does rotating night shift work affect nurses' sleep and patient safety?"
PERSONA = {
    "role": "PhD student",
    "domain": "Nursing",
    "expertise": "intermediate",
    "research_area": "occupational health",
    "use_case": "literature review",
}
ONE_MOMENT_DE = "Einen Moment"


class Annotator:
    """One annotator with both clients: the pages (session, German browser) and the API (its token)."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.pages = httpx.Client(
            base_url=site.url, headers={"Accept-Language": "de"}, follow_redirects=False, timeout=120
        )
        join = f"/join/{site.invitation}/"
        self.pages.post(join, data={"consent": "on", "csrfmiddlewaretoken": self.csrf(self.pages.get(join))})
        accepted = self.pages.post(
            f"/api/v1/invitations/{site.invitation}/accept/",
            json={"consent": True},
            headers={"X-CSRFToken": self.pages.cookies.get("csrftoken") or ""},
        )
        assert accepted.status_code == 200, accepted.text
        self.participation = accepted.json()["id"]
        self.api = httpx.Client(
            base_url=site.url,
            headers={"Authorization": f"Token {accepted.json()['token']}", "Accept": "application/json"},
            timeout=120,
        )
        assert self.api.put(f"/api/v1/participations/{self.participation}/persona/", json=PERSONA).status_code == 200

    @staticmethod
    def csrf(page: httpx.Response) -> str:
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert found, page.text[:500]
        return found.group(1)

    def ask(self, client_token: str) -> httpx.Response:
        return self.api.post(
            f"/api/v1/participations/{self.participation}/queries/",
            json={"text": QUESTION, "client_token": client_token},
        )


def hidden_fields(page: httpx.Response) -> dict[str, str]:
    return {
        unescape(name): unescape(value)
        for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page.text)
    }


def assert_one_moment_api(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text[:300]
    assert int(response.headers["Retry-After"]) >= 1
    body = response.json()
    assert set(body) == {"message", "extra"} and body["message"]
    assert body["extra"]["retry_after"] == int(response.headers["Retry-After"])


def assert_one_moment_page(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text[:300]
    assert int(response.headers["Retry-After"]) >= 1
    assert ONE_MOMENT_DE in response.text, response.text[:1000]  # the study's language (German)
    assert "/static/js/one-moment.js" in response.text  # the script that tries again
    assert "<script>" not in response.text and "style=" not in response.text  # nothing inline (CSP)


class Flow:
    """Requests flowing the whole time: an annotator's status poll, sent back to back from a thread until
    stopped (at most 2,000). Every answer's status is counted."""

    def __init__(self, annotator: Annotator, query_id: int) -> None:
        self.statuses: Counter[int | str] = Counter()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(annotator.api, query_id), daemon=True)

    def _run(self, api: httpx.Client, query_id: int) -> None:
        for _ in range(2000):
            if self.stop.is_set():
                return
            try:
                self.statuses[api.get(f"/api/v1/queries/{query_id}/").status_code] += 1
            except httpx.HTTPError as error:
                self.statuses[type(error).__name__] += 1

    def __enter__(self) -> Flow:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(timeout=300)


@pytest.mark.parametrize("pool", ["true", "false"], ids=["pooled", "connection-per-thread"])
def test_a_database_restart_answers_503_then_everything_works_and_nothing_is_written_twice(
    own_site: Site, pool: str
) -> None:
    """With the pool (the default) and without it (DATABASE_POOL=false: PgBouncer's deployments)."""
    site = own_site
    site.cluster.psql("UPDATE annotation_study SET language = 'de' WHERE slug = 'demo'")
    site.start_server(DATABASE_POOL=pool)
    annotator = Annotator(site)
    asked = annotator.ask(first_token := uuid.uuid4().hex)
    assert asked.status_code == 201, asked.text
    query_id, index = asked.json()["id"], asked.json()["index"]
    # Eager tasks: the summaries were written inside the request; the question is ready with its first match.
    current = annotator.api.get(f"/api/v1/queries/{query_id}/current-match/")
    assert current.status_code == 200, current.text
    match_id = current.json()["id"]
    compare = f"/study/demo/q/{index}/compare/"
    page = annotator.pages.get(compare)
    assert page.status_code == 200 and f'value="{match_id}"' in page.text

    with Flow(annotator, query_id) as flow:
        site.cluster.stop()
        # While the database is down (pg_ctl waited for it to stop), each kind of request, one by one.
        down_page = annotator.pages.get(compare)
        down_answer = annotator.pages.post(
            compare, data={"csrfmiddlewaretoken": annotator.csrf(page), "match_id": match_id, "choice": "left"}
        )
        down_read = annotator.api.get(f"/api/v1/queries/{query_id}/")
        down_choice = annotator.api.post(f"/api/v1/matches/{match_id}/choice/", json={"choice": "left"})
        down_ask = annotator.ask(first_token)  # the question sent again (a client's retry)
        site.cluster.start()
        site.wait_for_database()

    assert_one_moment_page(down_page)
    assert_one_moment_page(down_answer)
    # The answer page sends the answer again by itself: the same fields, to the same address.
    resend = hidden_fields(down_answer)
    assert resend["match_id"] == str(match_id) and resend["choice"] == "left"
    assert f'action="{compare}"' in down_answer.text
    for response in (down_read, down_choice, down_ask):
        assert_one_moment_api(response)
    assert flow.statuses[500] == 0 and set(flow.statuses) <= {200, 503}, flow.statuses

    # Back: every worker and thread reaches the database again (their pooled connections died with the server).
    reads = Counter(annotator.api.get(f"/api/v1/queries/{query_id}/").status_code for _ in range(16))
    assert reads == Counter({200: 16})
    # The answer sent again, by the one-moment page and by the API's client, is recorded once.
    again = annotator.pages.post(compare, data=resend)
    assert again.status_code == 302, again.text[:500]
    first = annotator.api.post(f"/api/v1/matches/{match_id}/choice/", json={"choice": "left"})
    second = annotator.api.post(f"/api/v1/matches/{match_id}/choice/", json={"choice": "left"})
    assert first.status_code == second.status_code == 200
    assert first.json()["answered_at"] == second.json()["answered_at"]
    # The question sent again with its client token, during the outage and after: still the one question.
    resent = annotator.ask(first_token)
    assert resent.status_code == 201 and resent.json()["id"] == query_id
    with psycopg.connect(site.cluster.url) as database:
        stored = database.execute(
            "SELECT (SELECT count(*) FROM annotation_judgment WHERE match_id = %s),"
            " (SELECT count(*) FROM annotation_query WHERE client_token = %s)",
            (match_id, first_token),
        ).fetchone()
    assert stored == (1, 1)
    errors = [line for line in site.log.read_text(errors="replace").splitlines() if "Internal Server Error" in line]
    assert errors == []


@pytest.mark.browser
def test_the_one_moment_page_tries_again_by_itself_and_lands_on_the_page(own_site: Site, browser: Any) -> None:
    site = own_site
    site.cluster.psql("UPDATE annotation_study SET language = 'de' WHERE slug = 'demo'")
    site.start_server()
    annotator = Annotator(site)
    asked = annotator.ask(uuid.uuid4().hex)
    assert asked.status_code == 201, asked.text
    compare = f"{site.url}/study/demo/q/{asked.json()['index']}/compare/"
    context = browser.new_context(locale="de-DE")
    context.add_cookies(
        [{"name": c.name, "value": c.value or "", "url": site.url} for c in annotator.pages.cookies.jar]
    )
    page = context.new_page()
    assert page.goto(compare).status == 200
    site.cluster.stop()
    try:
        shown = page.goto(compare)
        assert shown.status == 503
        assert page.locator("#one-moment h1").inner_text() == ONE_MOMENT_DE
    finally:
        site.cluster.start()
    # No click: the page loads itself again (after 2 s, then 4, 8, ...) until the database answers.
    page.wait_for_selector("#choice-form", timeout=90_000)
    assert page.url == compare
    context.close()
