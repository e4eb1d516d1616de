"""Attention checks in headless Chromium: an annotator who fails a check under the "warn" policy sees a gentle
notice and carries on; under "stop after 1 failure" the next page is the screen-out page with the recruiting
site's return link. The check looks like every other comparison, so the test reads which one it is from the
database. Offline backends and eager tasks: no worker needed."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from annotation.models import Match, Participation
from annotation.selectors.tournament import match_current
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record
from studies.models import Study
from tests.annotation.factories import StudyFactory, join
from tests.e2e.steps import arrive_and_describe_yourself

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]

RETURN_URL = "https://app.prolific.com/submissions/complete?cc=NOCHECK"
BUTTONS = {"left": "Left is better", "right": "Right is better", "neither": "Neither"}


def _study_with_a_decoy(**settings: Any) -> Study:
    """A study whose every question gets a check, with one earlier question whose summaries serve as decoys."""
    study = StudyFactory(check_share=1.0, **settings)
    earlier = join(study)
    query = query_submit(
        participation=earlier, text="Which interventions reduce fatigue on night shifts?", client_token=""
    )
    while (match := match_current(query=query)) is not None:
        judgment_record(match=match, choice="left", by=earlier)
    return study


def _answer(page: Page, choice: str) -> None:
    page.locator("#choice-form[data-ready]").wait_for(state="attached")
    with page.expect_navigation():
        page.get_by_role("button", name=re.compile(BUTTONS[choice])).click()


def _fail_the_check(page: Page, study: Study) -> None:
    """Ask a question, answer its data comparisons, and answer the check with the other summary."""
    page.get_by_label("Your question").fill("How does night shift work affect nurses' sleep?")
    page.get_by_role("button", name="Find and summarise").click()
    expect(page).to_have_url(re.compile(r"/q/1/compare/$"))
    while True:
        match = Match.objects.get(pk=int(page.locator("input[name=match_id]").input_value()))
        if match.check_expected:
            break
        _answer(page, "left")
    expect(page.locator(".progress-label")).to_have_text(re.compile(r"Comparison \d of 4"))
    _answer(page, "right" if match.check_expected == "left" else "left")


def test_a_failed_check_warns_under_warn_and_screens_out_under_stop(live_server: Any, browser: Browser) -> None:
    warned = _study_with_a_decoy(slug="checks-warn", check_policy="warn")
    page = arrive_and_describe_yourself(browser, live_server, warned)
    _fail_the_check(page, warned)
    notice = page.locator("[id^=message-]")
    expect(notice).to_contain_text("some comparisons have an answer we know, and yours did not match it")
    # A gentle notice: the study goes on (the next comparison, or the next question).
    expect(page).to_have_url(re.compile(r"/(q/1/compare|ask)/$"))
    page.reload()
    expect(notice).to_have_count(0)
    page.context.close()
    assert Participation.objects.get(study=warned, queries__text__startswith="How does").stopped_at is None

    stopped = _study_with_a_decoy(
        slug="checks-stop", check_policy="stop", check_max_failures=1, screen_out_url=RETURN_URL
    )
    page = arrive_and_describe_yourself(browser, live_server, stopped)
    _fail_the_check(page, stopped)
    expect(page).to_have_url(re.compile(r"/study/checks-stop/done/$"))
    expect(page.get_by_role("heading", level=1)).to_have_text("The study has ended for you")
    expect(page.get_by_role("link", name="Return to the recruiting site")).to_have_attribute("href", RETURN_URL)
    expect(page.locator("#completion-code")).to_have_count(0)
    # Back to a comparison: the participation has ended, so the router sends the annotator to this page again.
    page.goto("/study/checks-stop/q/1/compare/")
    expect(page).to_have_url(re.compile(r"/study/checks-stop/done/$"))
    page.context.close()
    screened = Participation.objects.filter(study=stopped, screened_out_at__isnull=False)
    assert screened.count() == 1 and screened.get().completion_code == ""
