"""A pre-written study in a real browser: an annotator arrives, gets the next item instead of a question box,
ranks its three imported outputs in the blind tournament (a bye and two comparisons), and is offered the next
item; the database holds both judgments, of the imported texts. Then its researcher signs in, computes the
report (a row per system) and exports the comparisons, as for a live study."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from analysis.models import ResearchJob
from annotation.models import Judgment, PrewrittenAssignment
from annotation.services.prewritten import prewritten_import
from tests.annotation.factories import StudyFactory
from tests.e2e.a11y import assert_accessible
from tests.e2e.steps import arrive_and_describe_yourself, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

OUTPUTS = {
    "alpha": "Night shifts cost nurses about an hour of sleep a day.",
    "beta": "Nurses on nights sleep less, by roughly one hour.",
    "gamma": "Shift work is bad for people.",
}


def test_an_annotator_ranks_a_prewritten_item(browser, live_server):
    study = StudyFactory(
        slug="prewritten",
        title="Summaries we wrote before",
        instructions="Pick the summary that tells a ward manager more.",
        systems=[
            {"label": label, "model_name": f"lab-{label}", "condition": "generic", "generation_backend": "prewritten"}
            for label in OUTPUTS
        ],
    )
    rows = "\n".join(
        f'{key},{label},"{text}","{source}",What does the {key} study find?'
        for key, source in (("cohort", "A cohort of 400 nurses slept 62 minutes less after nights."),
                            ("trial", "A trial of planned naps restored alertness."))
        for label, text in OUTPUTS.items()
    )  # fmt: skip
    prewritten_import(study=study, data="item_id,system,output,source,prompt\n" + rows, format="csv")

    page = arrive_and_describe_yourself(browser, live_server, study)
    expect(page.get_by_role("heading", name="Item 1 of 8")).to_be_visible()
    assert_accessible(page, "next item")
    expect(page.get_by_label("Your question")).to_have_count(0)
    page.get_by_role("button", name="Show the next item").click()
    page.wait_for_url("**/q/1/compare/")
    expect(page.get_by_text("What does the cohort study find?").first).to_be_visible()
    expect(page.get_by_text("A cohort of 400 nurses slept 62 minutes less after nights.").first).to_be_attached()
    body = page.locator("body").inner_text()
    assert not any(secret in body for secret in ("alpha", "beta", "gamma", "lab-"))
    for _ in range(2):  # three systems: one first-round comparison beside a bye, then the final
        page.wait_for_selector("#choice-form[data-ready]")
        first = page.locator('input[name="match_id"]').input_value()
        page.locator('button[value="left"]').click()
        if _ == 0:
            expect(page.locator('input[name="match_id"]')).not_to_have_value(first)
    page.wait_for_url("**/ask/")
    expect(page.get_by_role("heading", name="Item 2 of 8")).to_be_visible()

    judgments = list(Judgment.objects.select_related("winner"))
    assert len(judgments) == 2 and all(j.winner.text in OUTPUTS.values() for j in judgments)
    assert PrewrittenAssignment.objects.get().item.key == "cohort"

    # The researcher's side is the live study's: the report has a row per system, the export the two rows.
    get_user_model().objects.create_superuser("lead", "lead@example.org", "correct horse battery")
    research = sign_in(browser, live_server, "lead", "correct horse battery", next_path="/research/")
    research.get_by_role("link", name="Summaries we wrote before").click()
    expect(research.locator("dl.stats")).to_contain_text("Comparisons")
    research.get_by_label("Bootstrap resamples").fill("200")
    research.get_by_role("button", name="Compute report").click()
    research.get_by_role("link", name="Open the latest report").click()
    research.wait_for_selector("svg")
    strengths = research.locator("xpath=//h2[starts-with(., 'Bradley-Terry strengths')]/following::table[1]")
    rows = strengths.locator("tbody tr").all_inner_texts()
    assert len(rows) == 3 and all(any(label in row for row in rows) for label in OUTPUTS), rows
    assert sum(int(row.split("\t")[3]) for row in rows) == 2, rows  # the two judgments' winners
    research.go_back()
    comparisons = research.locator("form", has=research.get_by_role("heading", name="Export comparisons"))
    comparisons.get_by_label("CSV").check()
    comparisons.get_by_role("button", name="Export", exact=True).click()
    research.wait_for_selector("a:has-text('comparisons.csv')")
    assert set(ResearchJob.objects.filter(status="done").values_list("kind", flat=True)) == {"report", "export"}
