"""A key held or pressed twice answers one match only: in headless Chromium, the second press of a
quick double press lands on the next match before it has been on screen long enough and is ignored."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from annotation.models import Judgment
from tests.annotation.factories import StudyFactory
from tests.e2e.steps import arrive_and_describe_yourself

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]


def test_a_quick_double_press_answers_only_the_match_on_screen(live_server: Any, browser: Browser) -> None:
    # Offline backends, eager tasks: the summaries are ready as soon as the question is asked.
    study = StudyFactory(slug="double")
    page = arrive_and_describe_yourself(browser, live_server, study)
    page.get_by_label("Your question").fill("How does night shift work affect sleep?")
    page.get_by_role("button", name="Find and summarise").click()
    expect(page).to_have_url(re.compile(r"/q/1/compare/$"))
    label = page.locator(".progress-label")
    expect(label).to_have_text(re.compile("Comparison 1 of 3"))
    first = int(page.locator("input[name=match_id]").input_value())

    # A double press: the first answers this match; the second arrives as the next match appears.
    page.locator("#choice-form[data-ready]").wait_for(state="attached")
    with page.expect_navigation():
        page.keyboard.press("1")
    page.keyboard.press("1")
    expect(label).to_have_text(re.compile("Comparison 2 of 3"))
    second = int(page.locator("input[name=match_id]").input_value())
    assert second != first
    page.keyboard.press("1")  # and again, still too soon to have been read
    time.sleep(1.0)  # long enough for a second answer to have arrived, had it been sent
    expect(label).to_have_text(re.compile("Comparison 2 of 3"))
    assert list(Judgment.objects.values_list("match_id", "choice")) == [(first, "left")]

    # Once it has been read, the next match takes the key as usual.
    page.locator("#choice-form[data-ready]").wait_for(state="attached")
    with page.expect_navigation():
        page.keyboard.press("2")
    expect(label).to_have_text(re.compile("Comparison 3 of 3"))
    assert Judgment.objects.get(match_id=second).choice == "right"
    page.context.close()
