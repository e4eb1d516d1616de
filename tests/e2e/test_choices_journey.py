"""The annotator's choices in a real browser: the practice round and its feedback, one question whose first
match is a tie (by its key) with a comment, the final labelled as the final (and not scrolling sideways on a
phone), then the researcher's CSV export, which shows the tie and the comment. Tasks run eagerly on commit."""

from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect
from rest_framework.authtoken.models import Token

from annotation.models import Judgment
from studies.models import Study
from tests.annotation.factories import StudyFactory
from tests.e2e.a11y import assert_accessible
from tests.e2e.steps import arrive_and_describe_yourself
from tests.e2e.viewports import SIZES

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]
COMMENT = "Both cite the same trial; neither mentions rotas."


def test_practice_then_a_tie_with_a_comment_reaches_the_researchers_export(browser, live_server):
    study = StudyFactory(
        slug="choices",
        title="Choices trial",
        instructions="Ask about your own ward.",
        practice_round=True,
        allow_ties=True,
        comments=Study.Comments.MATCH,
    )
    page = arrive_and_describe_yourself(browser, live_server, study)

    # The practice round comes first; its feedback explains the better choice.
    expect(page.get_by_role("heading", name="Practice comparison")).to_be_visible()
    assert_accessible(page, "practice")
    page.get_by_role("button", name="Right (bottom) is better").click()
    expect(page.locator("#practice-feedback")).to_contain_text("The left (top) summary is the better choice")
    page.get_by_role("link", name="Start with your first question").click()

    page.get_by_label("Your question").fill("How does night shift work affect nurses' sleep?")
    page.get_by_role("button", name="Find and summarise").click()
    page.wait_for_url("**/q/1/compare/")
    assert_accessible(page, "compare with ties and comments")
    # The instructions open from the keyboard during the task.
    page.locator("#study-instructions summary").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_text("Ask about your own ward.")).to_be_visible()
    page.get_by_label("Comment on this comparison (optional)").fill(COMMENT)
    page.evaluate("document.activeElement.blur()")  # keys typed into the comment box choose nothing
    page.wait_for_selector("#choice-form[data-ready]")
    first_match = int(page.locator('input[name="match_id"]').input_value())
    page.keyboard.press("t")
    # The next match's form (expect, not wait_for_function: the Content-Security-Policy refuses the eval that
    # Playwright runs such a predicate with).
    expect(page.locator('input[name="match_id"]')).not_to_have_value(str(first_match))

    page.wait_for_selector("#choice-form[data-ready]")
    page.locator('button[value="left"]').click()
    expect(page.locator("#final-label")).to_have_text("Final comparison")
    page.set_viewport_size(SIZES["phone"]["viewport"])
    widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"the final scrolls sideways on a phone: {widths}"
    page.wait_for_selector("#choice-form[data-ready]")
    page.locator('button[value="right"]').click()
    page.wait_for_url("**/ask/")
    assert Judgment.objects.get(match__label="round1_ab").comment == COMMENT

    # The researcher's export (through the research API with the researcher's token, as a script would fetch
    # it; the research pages' export is tests/e2e/test_researcher_journey.py's) holds the tie, its comment and
    # the final.
    researcher = get_user_model().objects.create_superuser("boss", "boss@example.org", "correct horse battery")
    api = browser.new_context(
        base_url=live_server.url, extra_http_headers={"Authorization": f"Token {Token.objects.create(user=researcher)}"}
    ).request
    job = api.post("/api/v1/research/studies/choices/jobs/", data={"kind": "export", "options": {"format": "csv"}})
    assert job.status == 201, job.text()
    assert job.json()["status"] == "done", job.json()["error"]
    body = api.get(f"/api/v1/research/jobs/{job.json()['id']}/files/comparisons.csv").text()
    rows = {r["match"]: r for r in csv.DictReader(io.StringIO(body))}
    assert rows["round1_ab"]["choice"] == "tie" and rows["round1_ab"]["comment"] == COMMENT
    assert rows["round1_ab"]["winner_side"] == "" and rows["round1_ab"]["advanced_side"] in ("left", "right")
    assert rows["round1_cd"]["choice"] == "left" and rows["final"]["choice"] == "right"
