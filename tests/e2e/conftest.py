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


@pytest.fixture
def browser(_chromium: Any) -> Iterator[Any]:
    """The module's Chromium; the contexts (cookies, storage, pages) a test opened are closed after it,
    so the next test starts as a new visitor."""
    try:
        yield _chromium
    finally:
        for context in list(_chromium.contexts):
            context.close()
        _close_connections()


@pytest.fixture
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
