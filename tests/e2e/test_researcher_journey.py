"""The researcher's journey in a real browser: sign in, invite annotators, score, report, export."""

from __future__ import annotations

import random
import re
import time

import pytest
from django.contrib.auth import get_user_model

from analysis.models import ResearchJob
from annotation.selectors.tournament import match_current
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record
from scoring.models import CandidateScore
from tests.annotation.factories import StudyFactory, join
from tests.e2e.viewports import SIZES, Camera, new_context

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(150)]
HUMAN_PAUSE_S = 6  # longer than the dashboard's polling interval: a half-filled form must survive it


def _played_study():
    """Two annotators who each ranked one question (tasks run eagerly on commit)."""
    study = StudyFactory(slug="trial", title="Sleep and shift work trial")
    rng = random.Random(3)
    for text in ("night shift work and nurses' sleep", "mRNA vaccines in older adults"):
        participation = join(study)
        query = query_submit(participation=participation, text=text, client_token="")
        while (match := match_current(query=query)) is not None:
            judgment_record(match=match, choice=rng.choice(["left", "right"]), by=participation)
    return study


@pytest.mark.parametrize("size", SIZES)
def test_a_researcher_invites_scores_reports_and_exports(browser, live_server, screenshots, size):
    study = _played_study()
    get_user_model().objects.create_superuser("boss", "boss@example.org", "correct horse battery")
    page = new_context(browser, size).new_page()
    page.set_default_timeout(45_000)  # the first dashboard of a run is slow on a loaded machine
    camera = Camera(screenshots, "researcher", size)
    # The research site's sign-in (researchers need not be staff); an administrator's session opens the admin too.
    page.goto(f"{live_server.url}/research/")
    assert "/accounts/login/" in page.url
    camera.shot(page, "sign-in")
    page.get_by_label("Username").fill("boss")
    page.get_by_label("Password").fill("correct horse battery")
    page.get_by_role("button", name="Sign in").click()
    assert page.get_by_role("link", name="Sleep and shift work trial").is_visible()
    camera.shot(page, "study-list")
    page.goto(f"{live_server.url}/admin/studies/study/")
    camera.shot(page, "admin-studies")

    # Invitations: bulk-create three and get copyable links.
    page.get_by_role("link", name="Create invitations").click()
    page.get_by_label("Count").fill("3")
    camera.shot(page, "admin-invitations-form")
    page.get_by_role("button", name="Create invitations").click()
    camera.shot(page, "admin-invitations-created")
    links = page.get_by_label("new invitation links").input_value().split()
    assert len(links) == 3 and all("/join/" in link for link in links)
    assert study.invitations.count() == 2 + 3  # one per joined annotator, plus the new ones

    # The study's research page.
    page.goto(f"{live_server.url}/admin/studies/study/")
    page.get_by_role("link", name="Statistics and exports").click()
    expect_text = page.locator("dl.stats").inner_text()
    assert re.search(r"Comparisons\s+\d+", expect_text)
    camera.shot(page, "dashboard")

    page.get_by_label("Metrics (offline)").select_option(["rouge1", "chrf"])
    page.get_by_role("button", name="Score all summaries").click()
    page.wait_for_selector("text=Scoring: rouge1, chrf")
    camera.shot(page, "dashboard-scoring")
    assert CandidateScore.objects.filter(metric="rouge1", value__isnull=False).count() == 8

    # At a person's pace: the number half typed, a pause longer than the page's polling, then the rest.
    resamples = page.get_by_label("Bootstrap resamples")
    resamples.fill("20")
    time.sleep(HUMAN_PAUSE_S)
    assert resamples.input_value() == "20", "the dashboard lost what was being typed"
    resamples.fill("200")
    page.get_by_role("button", name="Compute report").click()
    camera.shot(page, "dashboard-report-started")
    page.get_by_role("link", name="Open the latest report").click()
    page.wait_for_selector("svg")
    report_text = page.content()
    assert "Win rate" in report_text or "win rate" in report_text
    camera.shot(page, "report")

    page.go_back()
    comparisons = page.locator("form", has=page.get_by_role("heading", name="Export comparisons"))
    comparisons.get_by_label("Parquet").check()
    comparisons.get_by_role("button", name="Export", exact=True).click()
    page.wait_for_selector("a:has-text('comparisons.parquet')")
    camera.shot(page, "dashboard-export")
    # How each summary was generated, beside the comparisons (truncated ones flagged).
    summaries = page.locator("form", has=page.get_by_role("heading", name="Export the summary table"))
    summaries.get_by_label("JSONL").check()
    summaries.get_by_role("button", name="Export summaries").click()
    page.wait_for_selector("a:has-text('summaries.jsonl')")
    assert "(summary table, jsonl)" in page.content()
    kinds = set(ResearchJob.objects.filter(status="done").values_list("kind", flat=True))
    assert kinds == {"report", "export"}

    # Bad input is refused with a message and starts nothing.
    page.get_by_label("Bootstrap resamples").fill("lots")
    page.get_by_role("button", name="Compute report").click()
    assert "whole number" in page.locator(".error-summary").inner_text()
    camera.shot(page, "dashboard-error")
    page.goto(f"{live_server.url}/research/token/")
    camera.shot(page, "token")
    assert ResearchJob.objects.count() == 3
