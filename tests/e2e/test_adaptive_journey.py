"""A 12-system adaptive study in a real browser: an annotator arrives, takes the next item and answers its eleven
comparisons, each next pair chosen from the answers so far, blind (no system named), counted "Comparison N of
11" and never announced as a final; the study then analyses with a Bradley-Terry strength per system."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from annotation.models import Judgment, PairTally
from tests.annotation.factories import prewritten_adaptive_study, system_number
from tests.e2e.a11y import assert_accessible
from tests.e2e.steps import arrive_and_describe_yourself

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


def test_an_annotator_plays_a_12_system_adaptive_question_to_the_end(browser, live_server, tmp_path):
    study = prewritten_adaptive_study(12, items=3, constrained_first_round=True)
    page = arrive_and_describe_yourself(browser, live_server, study)
    page.get_by_role("button", name="Show the next item").click()
    page.wait_for_url("**/q/1/compare/")
    pairs: list[frozenset[int]] = []
    for number in range(1, 12):
        page.wait_for_selector("#choice-form[data-ready]")
        expect(page.locator(".progress-label")).to_contain_text(f"Comparison {number} of 11")
        expect(page.locator("#final-label")).to_have_count(0)  # no round is a final here
        body = page.locator("body").inner_text()
        assert "sys-" not in body and "lab-model" not in body  # blind: no system named
        texts = page.locator(".summary-text").all_inner_texts()
        pair = frozenset(system_number(text) for text in texts)
        assert len(pair) == 2 and pair not in pairs  # two summaries, a pair never asked twice
        pairs.append(pair)
        if number == 1:
            assert_accessible(page, "adaptive comparison")
        first = page.locator('input[name="match_id"]').input_value()
        # The annotator prefers the lower-numbered system's summary, wherever it is shown.
        left, right = (system_number(text) for text in texts)
        page.locator(f'button[value="{"left" if left < right else "right"}"]').click()
        if number < 11:
            expect(page.locator('input[name="match_id"]')).not_to_have_value(first)
    page.wait_for_url("**/ask/")
    expect(page.get_by_role("heading", name="Item 2 of 8")).to_be_visible()

    judgments = Judgment.objects.filter(match__bracket__query__participation__study=study)
    assert judgments.count() == 11 and {j.choice for j in judgments} <= {"left", "right"}
    assert sum(t.first_wins + t.second_wins for t in PairTally.objects.filter(study=study)) == 11

    out = tmp_path / "out"
    call_command("analyze", "--study", study.slug, "--out", str(out), "--resamples", "100", stdout=io.StringIO())
    report = json.loads((out / "report.json").read_text())
    assert report["estimand"]["headline"] == "bradley_terry"
    assert len(report["bradley_terry"]["systems"]) == 12  # a strength (or its bound) for every system
