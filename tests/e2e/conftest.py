"""Fixtures for browser journeys: headless Debian Chromium driven by Playwright, and the real
Celery worker of tests/integration/worker.py behind pytest-django's live server."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require
from tests.integration.worker import celery_worker, celery_workers  # noqa: F401

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def _close_connections() -> None:
    """Connections a test opened while Playwright's loop ran live in that context only; close them while
    it still runs, or the test database cannot be dropped at the end of the session."""
    from django.db import connections

    connections.close_all()


@contextmanager
def chromium_running() -> Iterator[Any]:
    """Debian's Chromium (Playwright never downloads a browser here), until the block ends."""
    require(CHROMIUM.exists(), "Chromium not installed: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop on this thread; the test still reads the database
    # synchronously between page actions, which is safe here.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
            try:
                yield chromium
            finally:
                chromium.close()
                _close_connections()


@pytest.fixture(scope="module")
def _chromium() -> Iterator[Any]:
    """One Chromium for a test module: starting Playwright and Chromium costs seconds, a new context per
    test (see `browser`) milliseconds. Module, not session, scope: while Playwright's sync API is
    running, its event loop runs on this thread, so every later test of the process would run inside
    it (Django refuses database calls there, asyncio.run fails). Use it only in a module whose every
    test uses the browser (tests/e2e); elsewhere, `chromium_running` for one test (tests/faults)."""
    with chromium_running() as chromium:
        yield chromium


# Every page of a journey runs under the site's Content-Security-Policy (docs/permissions.md, "Headers and
# limits"). Chromium says "Refused to ... because it violates the following Content Security Policy directive"
# on the console for whatever the policy blocked; the page's own securitypolicyviolation event is written there
# too, so a violation Chromium reports only as an event is not missed.
POLICY_WORDS = ("Content Security Policy", "Content-Security-Policy")
REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", function (event) {
  console.error("Content Security Policy violation: " + event.violatedDirective + " blocked " +
    (event.blockedURI || "inline") + " at " + event.documentURI + ":" + event.lineNumber);
});
"""


def watch_policy(context: Any, violations: list[str]) -> Any:
    """Record every Content-Security-Policy violation on the pages of a browser context."""
    context.add_init_script(REPORT_VIOLATIONS)

    def on_page(page: Any) -> None:
        def on_console(message: Any) -> None:
            if message.type == "error" and any(word in message.text for word in POLICY_WORDS):
                violations.append(f"{page.url}: {message.text}")

        page.on("console", on_console)

    for page in context.pages:
        on_page(page)
    context.on("page", on_page)
    return context


@pytest.fixture
def browser(_chromium: Any) -> Iterator[Any]:
    """The module's Chromium; the contexts (cookies, storage, pages) a test opened are closed after it,
    so the next test starts as a new visitor. A page that broke the Content-Security-Policy fails the test,
    naming what was blocked."""
    violations: list[str] = []
    opened = _chromium.new_context

    def new_context(*args: Any, **kwargs: Any) -> Any:
        return watch_policy(opened(*args, **kwargs), violations)

    def new_page(*args: Any, **kwargs: Any) -> Any:
        # As Playwright's own Browser.new_page: a context of its own (closed after the test, as every other).
        return new_context(*args, **kwargs).new_page()

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_chromium, "new_context", new_context)
            patch.setattr(_chromium, "new_page", new_page)
            yield _chromium
    finally:
        for context in list(_chromium.contexts):
            context.close()
        _close_connections()
    if violations:
        pytest.fail("The Content-Security-Policy blocked something:\n" + "\n".join(violations), pytrace=False)


@pytest.fixture
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
