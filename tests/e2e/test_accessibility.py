"""Every annotator page and every research page, checked with axe-core in Chromium at desktop and phone
sizes: no serious or critical violation (WCAG 2.1 A/AA and axe's best practices). Tasks run eagerly, so no
worker is needed; the waiting page is shown for a question whose summaries are still being written. Each
test prints its counts by impact per page and keeps them in var/accessibility/ (a11y.write_summary)."""

from __future__ import annotations

import random
import re
from collections import Counter
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, Page, expect

from annotation.models import Query
from annotation.selectors.tournament import match_current
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record
from studies.models import Study
from studies.services.invitation import invitation_create_bulk
from tests.annotation.factories import StudyFactory, join
from tests.e2e import a11y
from tests.e2e.viewports import SIZES

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


RULES: dict[str, list[str]] = {}


def check_all(pages: dict[str, Counter[str]], page: Page, name: str) -> None:
    """Record the page's violations; the test fails at the end with every page's serious ones."""
    found = a11y.violations(page)
    pages[name] = a11y.by_impact(found)
    RULES[name] = sorted({v["id"] for v in found})
    bad = [v for v in found if v["impact"] in a11y.FAILING]
    if bad:
        pages.setdefault("_failures", Counter())[f"{name} ({page.url}):\n{a11y.describe(bad)}"] += 1


def report(pages: dict[str, Counter[str]], *, test: str, size: str) -> None:
    failures = pages.pop("_failures", Counter())
    a11y.write_summary(test, size, pages, RULES)
    print(f"\naxe violations (nodes) by impact per page ({test}, {size}):")
    for name, counts in pages.items():
        print(
            f"  {name:24} " + " ".join(f"{k}={counts.get(k, 0)}" for k in ("critical", "serious", "moderate", "minor")),
            *RULES[name],
        )
    assert not failures, "serious or critical accessibility violations:\n" + "\n".join(failures)


def test_the_check_finds_what_it_is_meant_to_find(browser: Browser) -> None:
    """A page with an image without text, an unlabelled field and no landmark: axe reports each, so a page
    counted clean above was really checked."""
    page = browser.new_page()
    page.set_content("<html><body><img src='x.png'><input type='text'><p>text</p></body></html>")
    found = {v["id"]: v["impact"] for v in a11y.violations(page)}
    assert found.get("image-alt") == "critical" and found.get("label") == "critical", found
    assert "region" in found, found


@pytest.mark.parametrize("size", SIZES)
def test_every_annotator_page_is_accessible(browser: Browser, live_server: Any, size: str) -> None:
    study = StudyFactory(slug="sleep", title="Sleep and shift work")
    token = invitation_create_bulk(study=study, count=1)[0].token
    page = browser.new_page(base_url=live_server.url, **SIZES[size])
    page.set_default_timeout(15_000)
    pages: dict[str, Counter[str]] = {}

    page.goto("/join/not-a-token/")
    check_all(pages, page, "join: unknown link")
    page.goto(f"/join/{token}/")
    check_all(pages, page, "join/consent")
    page.get_by_role("button", name="Start").click()
    expect(page.locator("#consent-error")).to_be_visible()
    check_all(pages, page, "consent error")
    page.get_by_label("I have read the information above and agree to take part.").check()
    page.get_by_role("button", name="Start").click()
    expect(page.get_by_role("heading", name="About you")).to_be_visible()
    check_all(pages, page, "persona")
    page.get_by_role("button", name="Save and continue").click()
    expect(page.locator(".field.has-error").first).to_be_visible()
    check_all(pages, page, "persona errors")
    page.get_by_label("Your role").fill("practising nurse")
    page.get_by_label("Your domain").fill("intensive care")
    page.get_by_label("Intermediate: some background").check()
    page.get_by_label("What will you use the answers for?").fill("organising night shifts")
    page.get_by_role("button", name="Save and continue").click()
    expect(page.get_by_label("Your question")).to_be_visible()
    check_all(pages, page, "ask")
    page.get_by_label("Your question").fill("How does night shift work affect nurses' sleep?")
    page.get_by_role("button", name="Find and summarise").click()
    expect(page).to_have_url(re.compile(r"/q/1/compare/"))
    check_all(pages, page, "compare")
    for _ in range(3):
        page.locator("#choice-form[data-ready]").wait_for(state="attached")
        with page.expect_navigation():
            page.keyboard.press("1")
    expect(page.get_by_label("Your question")).to_be_visible()

    # A second question still being written: the waiting page.
    participation = study.participations.get()
    Query.objects.create(
        participation=participation,
        index=2,
        text="Which naps help?",
        client_token="a11y",
        persona=participation.personas.latest("version"),
        status=Query.Status.GENERATING,
    )
    page.goto("/study/sleep/q/2/wait/")
    expect(page.locator("#generation-list")).to_be_visible()
    check_all(pages, page, "wait")

    Study.objects.filter(pk=study.pk).update(status=Study.Status.PAUSED)
    page.goto("/study/sleep/ask/")
    check_all(pages, page, "paused notice")
    Study.objects.filter(pk=study.pk).update(status=Study.Status.CLOSED)
    page.goto("/study/sleep/ask/")
    expect(page.get_by_text(participation.code).first).to_be_visible()  # the reference, on the closed page too
    check_all(pages, page, "closed notice")
    Study.objects.filter(pk=study.pk).update(status=Study.Status.OPEN)
    page.goto("/study/sleep/stop/")
    check_all(pages, page, "stop confirmation")
    page.get_by_role("button", name=re.compile("Yes, stop")).click()
    expect(page).to_have_url(re.compile(r"/done/$"))
    check_all(pages, page, "done")
    page.goto("/")
    check_all(pages, page, "home")
    page.goto("/study/no-such-study/ask/")
    check_all(pages, page, "not found")
    report(pages, test="annotator", size=size)


def _played_study() -> Study:
    study = StudyFactory(slug="trial", title="Sleep and shift work trial")
    rng = random.Random(3)
    for text in ("night shift work and nurses' sleep", "mRNA vaccines in older adults"):
        participation = join(study)
        query = query_submit(participation=participation, text=text, client_token="")
        while (match := match_current(query=query)) is not None:
            judgment_record(match=match, choice=rng.choice(["left", "right"]), by=participation)
    return study


@pytest.mark.parametrize("size", SIZES)
def test_every_research_page_is_accessible(browser: Browser, live_server: Any, size: str) -> None:
    study = _played_study()
    get_user_model().objects.create_superuser("boss", "boss@example.org", "correct horse battery")
    get_user_model().objects.create_user("visitor", "v@example.org", "correct horse battery")
    page = browser.new_page(base_url=live_server.url, **SIZES[size])
    page.set_default_timeout(45_000)  # the first dashboard of a run can be slow on a loaded machine
    pages: dict[str, Counter[str]] = {}

    page.goto("/research/")
    check_all(pages, page, "sign-in")
    page.get_by_label("Username").fill("boss")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    check_all(pages, page, "sign-in error")
    page.get_by_label("Password").fill("correct horse battery")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("link", name=study.title)).to_be_visible()
    check_all(pages, page, "study list")
    page.goto("/research/studies/trial/report/")
    check_all(pages, page, "no report yet")
    page.goto("/research/studies/trial/")
    check_all(pages, page, "dashboard")
    page.get_by_label("Bootstrap resamples").fill("lots")
    page.get_by_role("button", name="Compute report").click()
    expect(page.locator(".error-summary")).to_be_visible()
    check_all(pages, page, "dashboard errors")
    page.get_by_label("Bootstrap resamples").fill("200")
    page.get_by_role("button", name="Compute report").click()
    page.get_by_role("link", name="Open the latest report").click()
    page.wait_for_selector("svg")
    check_all(pages, page, "report")
    page.goto("/research/token/")
    check_all(pages, page, "token")
    page.context.clear_cookies()
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("visitor")
    page.get_by_label("Password").fill("correct horse battery")
    page.get_by_role("button", name="Sign in").click()
    page.goto("/research/")
    check_all(pages, page, "not a researcher")
    report(pages, test="research", size=size)


# Nothing in the demo corpus shares a word, or a long enough word beginning, with this question.
UNCOVERED = "Which glorptastic wibblers frobnicate quuxes?"


@pytest.mark.parametrize("size", SIZES)
def test_every_crowd_and_study_setting_page_is_accessible(browser: Browser, live_server: Any, size: str) -> None:
    """The pages a study's settings add: the open link's consent, the screening question (with its error
    and a wrong answer's end), the practice round and its feedback, the question page with the resume
    link (and its replace button), an id that has already started, and the first comparison of a question the sources do not cover (its notice and way out)."""
    study = StudyFactory(
        slug="crowd",
        title="Crowd study",
        open_link_enabled=True,
        screening_question="Do you work in healthcare?",
        screening_choices=["Yes", "No"],
        screening_accepted=["Yes"],
        practice_round=True,
        allow_ties=True,
        comments=Study.Comments.MATCH,
    )
    pages: dict[str, Counter[str]] = {}
    page = browser.new_context(base_url=live_server.url, **SIZES[size]).new_page()
    page.set_default_timeout(15_000)
    page.goto(f"/open/{study.open_link_token}/?PROLIFIC_PID=a11y-1&STUDY_ID=s&SESSION_ID=t")
    check_all(pages, page, "open link/consent")
    page.get_by_label("I have read the information above and agree to take part.").check()
    page.get_by_role("button", name="Start").click()
    expect(page).to_have_url(re.compile(r"/screening/$"))
    check_all(pages, page, "screening")
    page.get_by_role("button", name=re.compile("Continue")).click()
    expect(page.locator("#answer-error")).to_be_visible()
    # The message is tied to the choices, as on the other forms (static/js/app.js).
    assert page.get_by_label("Yes").get_attribute("aria-invalid") == "true"
    check_all(pages, page, "screening error")
    page.get_by_label("Yes").check()
    page.get_by_role("button", name=re.compile("Continue")).click()
    page.get_by_label("Your role").fill("practising nurse")
    page.get_by_label("Your domain").fill("intensive care")
    page.get_by_label("Intermediate: some background").check()
    page.get_by_label("What will you use the answers for?").fill("organising night shifts")
    page.get_by_role("button", name="Save and continue").click()
    expect(page.get_by_role("heading", name="Practice comparison")).to_be_visible()
    check_all(pages, page, "practice")
    page.get_by_role("button", name=re.compile("is better")).first.click()
    expect(page.locator("#practice-feedback")).to_be_visible()
    check_all(pages, page, "practice feedback")
    page.get_by_role("link", name="Start with your first question").click()
    expect(page.locator("#resume-link")).to_be_attached()
    check_all(pages, page, "ask with resume link")
    page.get_by_label("Your question").fill(UNCOVERED)
    page.get_by_role("button", name="Find and summarise").click()
    expect(page).to_have_url(re.compile(r"/q/1/compare/"))
    expect(page.get_by_text("We found no sources closely matching your question")).to_be_visible()
    check_all(pages, page, "compare, no matching sources")
    page.context.close()

    # A second participant answers the screening question wrongly: the study ends for them.
    other = browser.new_context(base_url=live_server.url, **SIZES[size]).new_page()
    other.set_default_timeout(15_000)
    other.goto(f"/open/{study.open_link_token}/?PROLIFIC_PID=a11y-2&STUDY_ID=s&SESSION_ID=u")
    other.get_by_label("I have read the information above and agree to take part.").check()
    other.get_by_role("button", name="Start").click()
    other.get_by_label("No").check()
    other.get_by_role("button", name=re.compile("Continue")).click()
    expect(other.locator("#screened-out")).to_be_visible()
    check_all(pages, other, "screened out")
    other.context.close()

    # The first participant's id from a fresh browser: the page that says it has already started.
    replay = browser.new_context(base_url=live_server.url, **SIZES[size]).new_page()
    replay.set_default_timeout(15_000)
    replay.goto(f"/open/{study.open_link_token}/?PROLIFIC_PID=a11y-1&STUDY_ID=s&SESSION_ID=v")
    expect(replay.locator("#already-started")).to_be_visible()
    check_all(pages, replay, "open link, id already started")
    report(pages, test="crowd-and-settings", size=size)


def tab_to(page: Page, selector: str, *, backwards: bool = False, limit: int = 25) -> None:
    """Press Tab (or Shift+Tab) until the element matching `selector` has the focus, and check the
    focus is visible there (the site's focus ring, not the browser's default or none)."""
    for _ in range(limit):
        page.keyboard.press("Shift+Tab" if backwards else "Tab")
        if page.evaluate("s => document.activeElement && document.activeElement.matches(s)", selector):
            outline = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
            assert outline not in ("", "none"), f"no visible focus on {selector} at {page.url}"
            return
    active = page.evaluate("() => document.activeElement && document.activeElement.outerHTML.slice(0, 120)")
    raise AssertionError(f"Tab never reached {selector} on {page.url}; focus is on {active}")


def test_an_annotator_can_take_part_with_the_keyboard_only(browser: Browser, live_server: Any) -> None:
    study = StudyFactory(slug="keys", title="Keyboard study", min_ranked_questions=1)
    token = invitation_create_bulk(study=study, count=1)[0].token
    page = browser.new_page(base_url=live_server.url, viewport={"width": 1280, "height": 800})
    page.set_default_timeout(15_000)
    page.goto(f"/join/{token}/")

    # Consent: Space ticks the box, Enter on the button starts.
    tab_to(page, "input[name=consent]")
    page.keyboard.press("Space")
    assert page.locator("input[name=consent]").is_checked()
    tab_to(page, "button[type=submit]")
    page.keyboard.press("Enter")

    # Persona: type into each field, choose the level with the arrow keys, send with Enter.
    expect(page.get_by_role("heading", name="About you")).to_be_visible()
    tab_to(page, "[name=role]")
    page.keyboard.type("practising nurse")
    tab_to(page, "[name=domain]")
    page.keyboard.type("intensive care")
    tab_to(page, "input[type=radio]")
    page.keyboard.press("Space")
    page.keyboard.press("ArrowDown")  # the second level
    tab_to(page, "[name=use_case]")
    page.keyboard.type("organising night shifts")
    tab_to(page, "button[type=submit]")
    page.keyboard.press("Enter")

    # A question, sent from its button; generation runs while the waiting page is shown.
    expect(page.get_by_label("Your question")).to_be_visible()
    tab_to(page, "[name=text]")
    page.keyboard.type("How does night shift work affect nurses' sleep?")
    tab_to(page, "button[type=submit]")
    page.keyboard.press("Enter")

    # Three comparisons: a documented shortcut, a button reached with Tab and pressed with Space, and
    # one reached backwards with Shift+Tab and pressed with Enter.
    for step in ("shortcut", "space", "shift-tab"):
        expect(page).to_have_url(re.compile(r"/q/1/compare/"))
        page.locator("#choice-form[data-ready]").wait_for(state="attached")
        with page.expect_navigation():
            if step == "shortcut":
                page.keyboard.press("2")
            elif step == "space":
                tab_to(page, "button[value=left]")
                page.keyboard.press("Space")
            else:
                tab_to(page, "button[value=right]", backwards=True, limit=60)
                page.keyboard.press("Enter")
    assert study.participations.get().queries.get().status == Query.Status.RANKED

    # The next question is offered; the annotator stops from the keyboard and gets the code.
    expect(page.get_by_label("Your question")).to_be_visible()
    tab_to(page, "form[action$='/finish/'] button")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/done/$"))
    code = study.participations.get().completion_code
    assert code
    expect(page.locator("#completion-code")).to_have_text(code)
