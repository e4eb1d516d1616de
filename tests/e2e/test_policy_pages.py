"""The Content-Security-Policy in Chromium (docs/permissions.md, "Headers and limits"): the watch every journey
runs under reports what the policy blocks; the API's documentation runs and sends a request under it; a link
field still selects its text when clicked, now from a script file instead of an inline onclick."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from playwright.sync_api import Browser, expect

from tests.e2e.conftest import watch_policy
from tests.e2e.steps import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

INLINE_PAGE = """<!doctype html><html lang="en"><head><title>probe</title></head><body>
<main><p style="color: red">styled inline</p><button onclick="void 0">handler</button></main>
<script>document.title = "ran";</script></body></html>"""


def test_the_watch_reports_what_the_policy_blocks(_chromium: Browser, live_server: Any) -> None:
    """A page with an inline script, style attribute and handler, served with the site's own header: the watch
    the journeys run under records each refusal (so a journey with none really had none), and the script did
    not run."""
    header = Client().get("/accounts/login/")["Content-Security-Policy"]
    violations: list[str] = []
    context = watch_policy(_chromium.new_context(base_url=live_server.url), violations)
    try:
        page = context.new_page()
        page.route(
            "**/policy-probe/",
            lambda route: route.fulfill(
                status=200, body=INLINE_PAGE, headers={"Content-Type": "text/html", "Content-Security-Policy": header}
            ),
        )
        with page.expect_console_message(lambda m: "Content Security Policy" in m.text):
            page.goto("/policy-probe/")
        page.get_by_role("button", name="handler").click()
        expect(page).to_have_title("probe")  # the inline script never ran
        page.evaluate("1")  # one more round trip: the console messages sent before it have arrived
        joined = "\n".join(violations)
        assert "script-src" in joined and "style-src" in joined, joined
    finally:
        context.close()


def test_the_api_documentation_runs_and_tries_a_request(browser: Browser, live_server: Any) -> None:
    """Swagger UI (its start-up script a file of its own) lists the endpoints and sends one; Redoc's address
    shows it too."""
    page = browser.new_context(base_url=live_server.url).new_page()
    page.set_default_timeout(30_000)
    page.goto("/api/redoc/")
    expect(page).to_have_url(f"{live_server.url}/api/docs/")
    expect(page.get_by_role("heading", name="Satisfy: human evaluation of summaries")).to_be_visible()
    operation = page.locator(
        ".opblock-get", has=page.locator(".opblock-summary-path[data-path='/api/v1/participations/']")
    )
    operation.locator(".opblock-summary").click()
    operation.get_by_role("button", name="Try it out").click()
    operation.get_by_role("button", name="Execute").click()
    # Signed out, the annotator's list is refused: the answer Swagger UI shows is the API's 403.
    expect(operation.locator(".live-responses-table tr.response .response-col_status")).to_contain_text("403")


def test_a_link_field_selects_its_text_when_clicked(browser: Browser, live_server: Any) -> None:
    """The researcher's API token field: one click selects the whole token, ready to copy."""
    get_user_model().objects.create_superuser("lead", "lead@example.org", "correct horse battery")
    page = sign_in(browser, live_server, "lead", "correct horse battery", next_path="/research/token/")
    page.get_by_role("button", name="Create a token").click()
    field = page.get_by_label("Token")
    key = field.input_value()
    assert len(key) == 40
    field.click()
    selected = field.evaluate("input => input.value.slice(input.selectionStart, input.selectionEnd)")
    assert selected == key
