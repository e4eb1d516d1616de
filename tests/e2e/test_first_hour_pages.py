"""What a newcomer trips over in the browser, checked at human pace: a dashboard that polls only while a
job runs and never wipes a form being filled, the stress form, the admin's study page at 1,280 px, the
comparison page's sources and the question button's busy label."""

from __future__ import annotations

import random
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, Page, expect

from analysis.models import ResearchJob
from annotation.selectors.tournament import match_current
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record
from scoring.models import ScoringRun
from tests.annotation.factories import StudyFactory, join
from tests.e2e.steps import arrive_and_describe_yourself

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HUMAN_PACE_S = 5  # a researcher takes seconds, not 800 ms, to fill a form


def _played_study():
    study = StudyFactory(slug="pace", title="Pace study")
    rng = random.Random(5)
    participation = join(study)
    query = query_submit(participation=participation, text="night shift work and nurses' sleep", client_token="")
    while (match := match_current(query=query)) is not None:
        judgment_record(match=match, choice=rng.choice(["left", "right"]), by=participation)
    return study


def _signed_in(browser: Browser, live_server: Any) -> Page:
    get_user_model().objects.create_superuser("boss", "boss@example.org", "correct horse battery")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(15_000)
    # The first dashboard of a process imports the stress-test suite (numpy, the openai client): seconds here.
    page.set_default_navigation_timeout(60_000)
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill("boss")
    page.get_by_label("Password").fill("correct horse battery")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/research/")  # signed in; a navigation started before this would cut the sign-in short
    return page


def _status_requests(page: Page) -> list[str]:
    seen: list[str] = []
    page.on("request", lambda request: seen.append(request.url) if "/status/" in request.url else None)
    return seen


def test_a_dashboard_with_only_finished_jobs_polls_nothing_and_keeps_a_half_filled_form(
    browser: Browser, live_server: Any
) -> None:
    study = _played_study()
    ScoringRun.objects.create(study=study, metrics=["rouge1"], status="done", done=2, total=2)
    ResearchJob.objects.create(study=study, kind="report", status="done", progress=100)
    ResearchJob.objects.create(study=study, kind="export", status="failed", error="disk full")
    page = _signed_in(browser, live_server)
    polls = _status_requests(page)
    page.goto(f"{live_server.url}/research/studies/{study.slug}/")
    page.evaluate("window.__notReloaded = true")
    page.get_by_label("Bootstrap resamples").fill("321")
    page.get_by_label("Random seed").first.fill("77")
    page.wait_for_timeout(HUMAN_PACE_S * 1000)
    assert page.evaluate("window.__notReloaded === true"), "the page reloaded"
    assert page.get_by_label("Bootstrap resamples").input_value() == "321"
    assert polls == [], f"finished jobs were polled: {polls}"


def test_a_job_ending_while_the_researcher_types_keeps_the_form_and_offers_the_reload(
    browser: Browser, live_server: Any
) -> None:
    study = _played_study()
    job = ResearchJob.objects.create(study=study, kind="export", status="running", progress=40, stage="writing")
    page = _signed_in(browser, live_server)
    polls = _status_requests(page)
    page.goto(f"{live_server.url}/research/studies/{study.slug}/")
    page.evaluate("window.__notReloaded = true")
    page.get_by_label("Bootstrap resamples").fill("4")  # half-way through typing 400
    page.wait_for_timeout(2000)
    assert polls, "a running job is polled"
    ResearchJob.objects.filter(pk=job.pk).update(status="done", progress=100)
    expect(page.get_by_role("link", name="Reload the page to see the results")).to_be_visible(timeout=10_000)
    n_polls = len(polls)
    page.wait_for_timeout(HUMAN_PACE_S * 1000)
    assert page.evaluate("window.__notReloaded === true"), "the page reloaded under the researcher's typing"
    assert page.get_by_label("Bootstrap resamples").input_value() == "4"
    assert len(polls) == n_polls, "the finished job is still polled"


def test_a_job_ending_on_an_untouched_page_reloads_it_once_to_show_its_files(
    browser: Browser, live_server: Any
) -> None:
    study = _played_study()
    job = ResearchJob.objects.create(study=study, kind="export", status="running", progress=40)
    page = _signed_in(browser, live_server)
    polls = _status_requests(page)
    page.goto(f"{live_server.url}/research/studies/{study.slug}/")
    page.evaluate("window.__notReloaded = true")
    # Waiting for the reload's load event, not wait_for_function: Playwright evaluates that predicate with
    # eval in the page, which the Content-Security-Policy refuses.
    with page.expect_event("load", timeout=10_000):
        ResearchJob.objects.filter(pk=job.pk).update(status="done", progress=100)
    assert page.evaluate("window.__notReloaded === undefined"), "the page reloaded itself"
    n_polls = len(polls)
    page.wait_for_timeout(HUMAN_PACE_S * 1000)
    assert len(polls) == n_polls, "after the reload nothing is polled"


def test_the_stress_form_offers_only_tests_that_can_run_here(browser: Browser, live_server: Any) -> None:
    study = _played_study()
    page = _signed_in(browser, live_server)
    page.goto(f"{live_server.url}/research/studies/{study.slug}/")
    tests = page.get_by_label("Tests")
    assert tests.locator("option[value=distractor]").is_enabled()
    assert tests.locator("option[value=paraphrased]").is_disabled()
    expect(page.locator("#tests-blocked")).to_contain_text("need a model server")


def test_the_admin_study_pages_fit_1280_px(browser: Browser, live_server: Any) -> None:
    fresh = StudyFactory(slug="fresh")  # editable systems: inputs and a settings box on every row
    played = _played_study()  # systems locked (summaries exist): shown as text
    page = _signed_in(browser, live_server)
    for url in (
        f"/admin/studies/study/{fresh.pk}/change/",
        f"/admin/studies/study/{played.pk}/change/",
        "/admin/studies/study/add/",
    ):
        page.goto(f"{live_server.url}{url}")
        expect(page.get_by_role("heading", level=1)).to_be_visible()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 1280, f"{url} is {width} px wide at 1,280 px"
    page.goto(f"{live_server.url}/admin/studies/study/{fresh.pk}/change/")
    assert page.locator("#id_systems-0-backend_settings").is_visible()


def test_sources_are_numbered_once_and_the_question_button_shows_it_is_busy(browser: Browser, live_server: Any) -> None:
    study = StudyFactory(slug="first-hour")
    page = arrive_and_describe_yourself(browser, live_server, study)
    page.get_by_label("Your question").fill("How does night shift work affect nurses' sleep?")
    # Hold the submission in the page (after the site's own handler has run) to see the button meanwhile.
    page.evaluate("document.querySelector('form').addEventListener('submit', function (e) { e.preventDefault(); })")
    page.get_by_role("button", name="Find and summarise").click()
    expect(page.locator("#ask-form button[type=submit]")).to_have_text("Sending…")
    expect(page.locator("#ask-form button[type=submit]")).to_be_disabled()
    page.evaluate("document.querySelector('form').submit()")
    expect(page.get_by_role("heading", name="Sources")).to_be_visible(timeout=20_000)
    first = page.locator(".sources li").first
    assert first.evaluate("li => getComputedStyle(li).listStyleType") == "none"
    assert first.locator("summary").inner_text().startswith("[1]")
