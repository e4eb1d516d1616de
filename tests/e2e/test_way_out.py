"""With no worker running at all, the waiting page does not say "Searching…" forever: past its deadline
(2 s here) it says what is happening and the annotator sets the question aside, asks another, then stops
the study through its confirmation page, which warns that with nothing ranked there is no completion code,
and leaves with the reference to give the research team. Headless Chromium, real broker."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from annotation.models import Participation, Query
from tests.annotation.factories import StudyFactory
from tests.e2e.steps import arrive_and_describe_yourself
from tests.integration.worker import WorkerPool

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.timeout(90)]


def test_with_no_worker_the_annotator_sets_a_question_aside_then_stops(
    celery_workers: WorkerPool, live_server: Any, browser: Browser, settings: Any
) -> None:
    settings.ANNOTATION_WAIT_DEADLINE_S = 2  # tasks go to the broker, but no worker is started
    study = StudyFactory(slug="no-worker")
    page = arrive_and_describe_yourself(browser, live_server, study)

    def ask(number: int, question: str, *, index: int) -> None:
        expect(page.get_by_role("heading", level=1)).to_have_text(f"Question {number} of 8")
        page.get_by_label("Your question").fill(question)
        page.get_by_role("button", name="Find and summarise").click()
        expect(page).to_have_url(re.compile(rf"/q/{index}/wait/$"))

    ask(1, "How does night shift work affect sleep?", index=1)
    overdue = page.locator("#overdue")
    # The page updates by itself: the way out appears once the deadline has passed, without a reload.
    expect(overdue).to_be_visible(timeout=10_000)
    expect(page.locator("#wait-message")).to_contain_text("The search for sources has taken more than 2 seconds")
    page.get_by_role("button", name="Set this question aside").click()

    # Still question 1 of 8: the set-aside question did not count (it keeps its number in the data).
    ask(1, "Which interventions reduce fatigue on night shifts?", index=2)
    expect(overdue).to_be_visible(timeout=10_000)
    page.get_by_role("link", name="Stop the study").click()
    expect(page.get_by_role("heading", name="Stop the study?")).to_be_visible()
    expect(page.locator("main")).to_contain_text("is set aside and does not count")
    expect(page.locator("#no-code-warning")).to_contain_text("you get no completion code")
    page.get_by_role("button", name="Yes, stop without a code").click()
    expect(page.get_by_role("heading", name="You have stopped the study")).to_be_visible()
    reference = page.locator("#participation-reference").inner_text().strip()
    expect(page.locator("#completion-code")).to_have_count(0)
    page.context.close()

    participation = Participation.objects.get(study=study)
    assert reference == participation.code and participation.completion_code == ""
    assert participation.stopped_at is not None and participation.completed_at is None
    assert list(participation.queries.order_by("index").values_list("index", "status", "set_aside_reason")) == [
        (1, Query.Status.DISCARDED, "too_slow"),
        (2, Query.Status.DISCARDED, "stopped"),
    ]
