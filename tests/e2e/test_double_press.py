"""A key held or pressed twice answers one match only: in headless Chromium, the second press of a
quick double press lands on the next match before it has been on screen long enough and is ignored."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from annotation.models import Judgment
from annotation.services.participation import invitation_create_bulk
from tests.annotation.factories import StudyFactory

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]


def test_a_quick_double_press_answers_only_the_match_on_screen(live_server: Any, browser: Browser) -> None:
    # Offline backends, eager tasks: the summaries are ready as soon as the question is asked.
    study = StudyFactory(slug="double")
    token = invitation_create_bulk(study=study, count=1)[0].token
    context = browser.new_context(base_url=live_server.url)
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"/join/{token}/")
    page.get_by_label("I have read the information above and agree to take part.").check()
    page.get_by_role("button", name="Start").click()
    page.get_by_label("Your role").fill("practising nurse")
    page.get_by_label("Your domain").fill("intensive care")
    page.get_by_label("Intermediate: some background").check()
    page.get_by_label("What will you use the answers for?").fill("organising night shifts")
    page.get_by_role("button", name="Save and continue").click()
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
    context.close()
