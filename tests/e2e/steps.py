"""Steps that several browser journeys share: an annotator arriving through an invitation."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Browser, BrowserContext, Page

from studies.models import Study
from studies.services.invitation import invitation_create_bulk


def arrive_and_describe_yourself(
    browser: Browser, live_server: Any, study: Study, *, context: BrowserContext | None = None, timeout_ms: int = 15_000
) -> Page:
    """A new annotator opens a fresh invitation, consents and fills the persona form as a nurse;
    the page is then on the study's first question. ``context``: a browser context of the test's own (a
    viewport, permissions), based at the live server."""
    token = invitation_create_bulk(study=study, count=1)[0].token
    context = context or browser.new_context(base_url=live_server.url)
    page = context.new_page()
    page.set_default_timeout(timeout_ms)
    page.goto(f"/join/{token}/")
    page.get_by_label("I have read the information above and agree to take part.").check()
    page.get_by_role("button", name="Start").click()
    page.get_by_label("Your role").fill("practising nurse")
    page.get_by_label("Your domain").fill("intensive care")
    page.get_by_label("Intermediate: some background").check()
    page.get_by_label("What will you use the answers for?").fill("organising night shifts")
    page.get_by_role("button", name="Save and continue").click()
    return page


def sign_in(browser: Browser, live_server: Any, username: str, password: str, *, next_path: str) -> Page:
    """A new browser context signed in through the sign-in page as `username`, then at `next_path`."""
    page = browser.new_context(base_url=live_server.url).new_page()
    page.set_default_timeout(45_000)  # a fresh process's first research page is slow on a loaded machine
    page.goto(f"/accounts/login/?next={next_path}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    return page
