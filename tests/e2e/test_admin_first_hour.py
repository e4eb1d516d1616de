"""Issue 33, the admin as a newcomer meets it at 1,280 px: the index says when generations failed and links to
them; the study list's links and the failed generations' status and reason are on screen; a system's
generation backend is chosen from the registry's names. Checked with axe; photographed into SCREENS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, Page, expect

from annotation.models import Candidate
from annotation.services.query import query_submit
from generation.registry import GENERATION_BACKENDS
from tests.annotation.factories import StudyFactory, join
from tests.e2e import a11y

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

SCREENS = Path("/work/notes/screens")
WIDTH = 1280
REASON = (
    "Gave up after 4 attempts; the last: model-one: 503 Service Unavailable from http://127.0.0.1:9/v1/chat/"
    "completions: The engine is currently overloaded, please try again later. (asked 3 times)"
)


def _signed_in(browser: Browser, live_server: Any) -> Page:
    get_user_model().objects.create_superuser("boss", "boss@example.org", "correct horse battery")
    page = browser.new_page(viewport={"width": WIDTH, "height": 900})
    page.set_default_timeout(20_000)
    page.goto(f"{live_server.url}/admin/login/")
    page.get_by_label("Username").fill("boss")
    page.get_by_label("Password").fill("correct horse battery")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/admin/")
    return page


def _on_screen(page: Page, locator: Any, what: str) -> None:
    box = locator.bounding_box()
    assert box is not None, f"{what} is not shown"
    assert box["x"] >= 0 and box["x"] + box["width"] <= WIDTH, f"{what} ends at {box['x'] + box['width']:.0f} px"


def _failed_generation() -> None:
    study = StudyFactory(
        slug="a-study-with-a-rather-long-slug-as-newcomers-write-them",
        title="How annotators judge personalised summaries of research abstracts (pilot, night shifts)",
    )
    query = query_submit(
        participation=join(study), text="How do night shifts affect nurses' sleep? " * 3, client_token=""
    )
    # Tasks run eagerly here: the question was retrieved and its summaries written; one of them failed.
    candidate = Candidate.objects.filter(query=query).order_by("pk").first()
    assert candidate is not None
    Candidate.objects.filter(pk=candidate.pk).update(status=Candidate.Status.FAILED, attempts=4, failure_reason=REASON)


def test_the_admin_shows_failed_generations_and_fits_1280_px(browser: Browser, live_server: Any) -> None:
    _failed_generation()
    page = _signed_in(browser, live_server)
    alert = page.locator("#failed-work-alert")
    expect(alert).to_contain_text("1 generation failed")
    a11y.assert_accessible(page, "admin index with a failure")
    SCREENS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENS / "admin-index-desktop.png"), full_page=True)
    alert.get_by_role("link").click()
    expect(page.get_by_role("heading", level=1)).to_be_visible()
    assert "status__exact=failed" in page.url
    row = page.locator("#result_list tbody tr").first
    _on_screen(page, row.locator("td.field-status"), "the failed generation's status")
    _on_screen(page, row.locator("td.field-short_reason"), "its failure reason")
    expect(row.locator("td.field-short_reason")).to_contain_text("503 Service Unavailable")
    page.screenshot(path=str(SCREENS / "admin-failed-generations-desktop.png"), full_page=True)

    page.goto(f"{live_server.url}/admin/studies/study/")
    for name in ("Create invitations", "Statistics and exports", "Preview as annotator"):
        _on_screen(page, page.get_by_role("link", name=name).first, f"the study list's {name!r}")
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    page.screenshot(path=str(SCREENS / "admin-study-list-desktop.png"), full_page=True)

    fresh = StudyFactory(slug="fresh")  # no summaries yet: its systems are editable
    page.goto(f"{live_server.url}/admin/studies/study/{fresh.pk}/change/")
    backend = page.locator("#id_systems-0-generation_backend")
    options = backend.locator("option").evaluate_all("options => options.map(o => o.value).filter(Boolean)")
    assert options == list(GENERATION_BACKENDS)
    page.screenshot(path=str(SCREENS / "admin-study-add-desktop.png"), full_page=True)
