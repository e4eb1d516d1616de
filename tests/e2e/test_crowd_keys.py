"""In headless Chromium (docs/crowd.md, "Coming back"): a Prolific participant's id replayed on the open link
from a fresh browser gets a page saying the id has already started and nothing of theirs; the participant
replaces their resume link, after which the old one opens nothing and the new one continues; once they stop,
the link opens nothing either; and in a study that trusts the platform id, the id alone continues."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from annotation.models import Participation
from studies.services.study import study_update
from tests.annotation.factories import StudyFactory

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

# The participant's own words: no other browser may see them.
ROLE, DOMAIN, USE = "Zanzibar ferry pilot", "tidal navigation", "planning Quokkaville crossings at dawn"


def fresh(browser: Browser, live_server: Any) -> Page:
    """A new browser: no cookies, no session."""
    page = browser.new_context(base_url=live_server.url).new_page()
    page.set_default_timeout(30_000)
    return page


def join(page: Page, token: str, pid: str) -> None:
    page.goto(f"/open/{token}/?PROLIFIC_PID={pid}&STUDY_ID=60aa11bb22cc&SESSION_ID=s-{pid}")
    page.get_by_label("I have read the information above and agree to take part.").check()
    page.get_by_role("button", name="Start").click()
    page.get_by_label("Your role").fill(ROLE)
    page.get_by_label("Your domain").fill(DOMAIN)
    page.get_by_label("Expert: I work in this area").check()
    page.get_by_label("What will you use the answers for?").fill(USE)
    page.get_by_role("button", name="Save and continue").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Question 1 of 2")


def shows_nothing_of(page: Page, participation: Participation) -> None:
    participation.refresh_from_db()
    content = page.content()
    for theirs in (ROLE, DOMAIN, "Quokkaville", participation.code, participation.resume_token):
        assert theirs not in content, theirs


def test_an_id_or_a_dead_resume_link_from_another_browser_gets_nothing_of_the_participants(
    live_server: Any, browser: Browser, settings: Any
) -> None:
    settings.SITE_URL = live_server.url  # the resume link the page shows points at this server
    study = StudyFactory(slug="crowd-keys", queries_per_annotator=2, open_link_enabled=True)
    token = study.open_link_token
    own = fresh(browser, live_server)
    join(own, token, "5f0c1a2b3c4d5e6f7a8b9c0d")
    participation = Participation.objects.get(study=study, external_id="5f0c1a2b3c4d5e6f7a8b9c0d")
    first_link = own.locator("#resume-link").input_value()

    # Someone else with the open link and the id, in a fresh browser: told how to continue, given nothing.
    replay = fresh(browser, live_server)
    replay.goto(f"/open/{token}/?PROLIFIC_PID=5f0c1a2b3c4d5e6f7a8b9c0d&STUDY_ID=60aa11bb22cc&SESSION_ID=x")
    expect(replay.get_by_role("heading", level=1)).to_have_text("This participant id has already started this study")
    expect(replay.get_by_role("alert")).to_contain_text("open your personal resume link")
    shows_nothing_of(replay, participation)
    replay.goto(f"/study/{study.slug}/ask/")  # straight to the study's pages: signed in as no one
    expect(replay).to_have_url(re.compile(r"/\?next="))
    shows_nothing_of(replay, participation)

    # The participant replaces the link: the page shows a new one.
    own.get_by_role("button", name="Replace my resume link").click()
    expect(own.get_by_text("Your resume link has been replaced")).to_be_visible()
    new_link = own.locator("#resume-link").input_value()
    assert new_link != first_link and new_link.startswith(live_server.url + "/resume/")

    # The old link opens nothing; the new one continues where the participant is.
    stale = fresh(browser, live_server)
    stale.goto(first_link)
    expect(stale.get_by_role("alert")).to_contain_text("This resume link is not valid")
    shows_nothing_of(stale, participation)
    phone = fresh(browser, live_server)
    phone.goto(new_link)
    expect(phone.get_by_role("heading", level=1)).to_have_text("Question 1 of 2")
    expect(phone.get_by_label("Your personal resume link")).to_have_value(new_link)

    # The participant stops: from then on the link opens nothing, however often.
    own.get_by_role("link", name="Stop the study").click()
    own.get_by_role("button", name="Yes, stop without a code").click()
    expect(own.get_by_role("heading", level=1)).not_to_have_text("Question 1 of 2")
    participation.refresh_from_db()
    assert participation.stopped_at is not None
    for _ in range(2):
        late = fresh(browser, live_server)
        late.goto(new_link)
        expect(late.get_by_role("alert")).to_contain_text("This resume link no longer works")
        shows_nothing_of(late, participation)


def test_a_study_that_trusts_the_platform_id_lets_the_id_alone_continue(live_server: Any, browser: Browser) -> None:
    study = StudyFactory(slug="crowd-trust", queries_per_annotator=2, open_link_enabled=True)
    study_update(study=study, trust_platform_id=True)
    own = fresh(browser, live_server)
    join(own, study.open_link_token, "trusting-1")
    other = fresh(browser, live_server)
    other.goto(f"/open/{study.open_link_token}/?PROLIFIC_PID=trusting-1&STUDY_ID=60aa11bb22cc&SESSION_ID=y")
    expect(other.get_by_role("heading", level=1)).to_have_text("Question 1 of 2")
    assert Participation.objects.filter(study=study).count() == 1
