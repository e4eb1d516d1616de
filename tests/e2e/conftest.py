"""Fixtures for browser journeys: headless Debian Chromium driven by Playwright, and the real
Celery worker of tests/integration/worker.py behind pytest-django's live server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

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


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Debian's Chromium (Playwright never downloads a browser here)."""
    require(CHROMIUM.exists(), "Chromium not installed: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop on this thread; the test still reads the database
    # synchronously between page actions, which is safe here.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()
            # Connections the test opened while Playwright's loop ran live in that context only;
            # close them here, or the test database cannot be dropped at the end of the session.
            from django.db import connections

            connections.close_all()


@pytest.fixture
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
