"""A new annotator's whole journey in headless Chromium: invitation, consent, persona, two questions
generated live by a real Celery worker through an OpenAI-compatible stand-in, the blind tournament
(buttons and keyboard, a reload and the back button on the way, a "neither" that skips a final),
then finishing early; afterwards, what the database holds."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect
from playwright.sync_api import Error as PlaywrightError

from annotation.models import Judgment, Match, Participation, Query
from studies.models import Study
from studies.services.invitation import invitation_create_bulk
from studies.services.study import study_create
from tests.e2e.viewports import SIZES, Camera, new_context
from tests.integration.worker import WorkerPool
from tests.support.openai_standin import openai_standin

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.timeout(150)]

MODELS = ("llama-3.3-70b-instruct", "deepseek-v3.1")
SLOW_MODEL_EXTRA_S = 1.5  # the second model answers later, so the waiting page shows summaries one by one
QUESTIONS = (
    "How does night shift work affect nurses' sleep and patient safety?",
    "Which interventions reduce fatigue in intensive care staff working rotating shifts?",
)
CONDITION_WORDS = re.compile(r"\b(persona|personali[sz]ed|generic)\b", re.IGNORECASE)


def responder(body: dict[str, Any]) -> str:
    """A grounded two-paragraph answer that differs per prompt and model, like a real model's."""
    import hashlib
    import json

    if body.get("model") == MODELS[1]:
        time.sleep(SLOW_MODEL_EXTRA_S)
    digest = hashlib.sha256(json.dumps([body["model"], body["messages"]], sort_keys=True).encode()).hexdigest()
    n = int(digest[:2], 16)
    first, second, third = 1 + n % 3, 4 + n % 3, 7 + n % 4
    return (
        f"Answer {digest[:6]}. Rotating night shifts shorten and fragment daytime sleep [{first}], and the "
        f"resulting fatigue is associated with more medication errors and near misses [{second}].\n\n"
        f"Interventions such as planned naps, forward-rotating schedules and limits on consecutive nights "
        f"reduce sleepiness in some studies [{third}][{first}], although the evidence is mixed."
    )


def open_study(base_url: str) -> Study:
    return study_create(
        slug="night-shifts",
        title="Evidence for clinical practice",
        instructions="Ask questions from your own work. Compare two summaries at a time.",
        consent_text="Your answers are stored under a pseudonymous code.",
        status=Study.Status.OPEN,
        systems=[
            {
                "label": f"system-{model.split('-')[0]}-{condition}",
                "model_name": model,
                "condition": condition,
                "generation_backend": "openai",
                "backend_settings": {"base_url": base_url, "max_retries": 1, "timeout": 10},
            }
            for model in MODELS
            for condition in ("persona", "generic")
        ],
    )


def at(path: str) -> re.Pattern[str]:
    """A page URL ending in `path`. Once a citation was followed, its #source-n fragment rides along
    on every later redirect (the forms post to the current URL); see the report."""
    return re.compile(rf"{path}(#source-\d+)?$")


def status_reply(response: Any, replies: list[str]) -> None:
    if response.url.endswith("/status/"):
        try:
            replies.append(response.text())
        except PlaywrightError:  # the page navigated away while the reply was read
            pass


class Journey:
    """The annotator's browser tab, with the checks every page must pass."""

    def __init__(self, page: Page, study: Study, camera: Camera) -> None:
        self.page = page
        self.study = study
        self.camera = camera
        self.forbidden = [*MODELS, *study.systems.values_list("label", flat=True)]
        self.answers: dict[int, str] = {}  # match id -> choice, as given in the browser

    def shot(self, name: str, page: Page | None = None) -> None:
        self.camera.shot(page or self.page, name)

    def assert_blind(self, page: Page | None = None) -> None:
        """Nothing on the page tells which model or condition wrote a summary."""
        page = page or self.page
        html = page.content().lower()
        for name in self.forbidden:
            assert name.lower() not in html, f"{name!r} is on {page.url}"
        text = page.inner_text("body")
        assert not CONDITION_WORDS.search(text), f"condition word on {page.url}: {CONDITION_WORDS.search(text)}"

    def match_id(self, page: Page | None = None) -> int:
        return int((page or self.page).locator("input[name=match_id]").input_value())

    def expect_match(self, question: int, number: int, total: int | str) -> int:
        page = self.page
        expect(page).to_have_url(at(rf"/q/{question}/compare/"))
        expect(page.locator(".progress-label")).to_have_text(
            re.compile(rf"Question {question} of 8 · Comparison {number} of ({total})")
        )
        expect(page.locator("article.summary")).to_have_count(2)
        self.assert_blind()
        self.assert_citations_link_to_sources()
        return self.match_id()

    def assert_citations_link_to_sources(self) -> None:
        page = self.page
        cites = page.locator("article.summary a.cite")
        assert cites.count() >= 4
        for i in range(cites.count()):
            cite = cites.nth(i)
            number = re.fullmatch(r"\[(\d+)\]", cite.inner_text()).group(1)  # type: ignore[union-attr]
            assert cite.get_attribute("href") == f"#source-{number}"
            source = page.locator(f"#source-{number}")
            expect(source).to_have_count(1)
            expect(source).to_contain_text(f"[{number}]")

    def choose(self, *, button: str | None = None, key: str | None = None, expected: str) -> int:
        """Answer the match on the page by clicking `button` or pressing `key`; wait for the next page."""
        page = self.page
        match_id = self.match_id()
        # The page takes input once it has been on screen long enough to be read (buttons wait for it).
        page.locator("#choice-form[data-ready]").wait_for(state="attached")
        with page.expect_navigation():
            if button:
                page.get_by_role("button", name=re.compile(button)).click()
            else:
                page.keyboard.press(key)  # type: ignore[arg-type]
        self.answers[match_id] = expected
        return match_id

    def ask(self, number: int, question: str) -> None:
        page = self.page
        expect(page).to_have_url(at("/ask/"))
        expect(page.locator(".progress-label")).to_have_text(f"Question {number} of 8")
        expect(page.get_by_role("heading", level=1)).to_have_text(f"Question {number} of 8")
        self.shot(f"q{number}-ask")
        page.get_by_label("Your question").fill(question)
        page.get_by_role("button", name="Find and summarise").click()
        expect(page).to_have_url(at(rf"/q/{number}/wait/"))
        expect(page.locator(".progress-label")).to_have_text(f"Question {number} of 8")
        self.assert_blind()
        try:  # a picture of the page mid-way, if the moment is caught
            page.locator("#generation-list li[data-status=done]").first.wait_for(timeout=8_000)
            self.shot(f"q{number}-wait")
        except PlaywrightError:
            pass
        expect(page).to_have_url(at(rf"/q/{number}/compare/"), timeout=40_000)


def record_progress(page: Page, seen: list[tuple[str, list[list[str]]]]) -> None:
    """Keep every state of the waiting page's list, as the annotator saw it, across navigations."""
    page.expose_function("recordProgress", lambda path, items: seen.append((path, items)))
    page.add_init_script(
        """
        document.addEventListener("DOMContentLoaded", () => {
          const list = document.getElementById("generation-list");
          if (!list) return;
          const snap = () => window.recordProgress(location.pathname,
            Array.from(list.querySelectorAll("li")).map(li => [li.dataset.status || "", li.textContent.trim()]));
          snap();
          new MutationObserver(snap).observe(list, {childList: true, subtree: true, characterData: true});
        });
        """
    )


def assert_progress_was_live(seen: list[tuple[str, list[list[str]]]], question: int) -> None:
    states = [items for path, items in seen if path.endswith(f"/q/{question}/wait/")]
    assert states, "the waiting page was never shown"
    for items in states:
        for _status, text in items:
            assert re.fullmatch(r"Summary [1-4]: (waiting|being written…|ready)|Finding sources", text), text
    # The page updated by itself: some summaries ready while others were still being written.
    partly = [items for items in states if len(items) == 4 and 0 < sum(status == "done" for status, _ in items) < 4]
    assert partly, f"never saw summaries turn ready one by one: {states}"
    readies = [sum(text.endswith("ready") for _, text in items) for items in states]
    assert readies == sorted(readies), f"progress went backwards: {readies}"


def layout_of_summaries(page: Page) -> str:
    left, right = (page.locator("article.summary").nth(i).bounding_box() for i in (0, 1))
    assert left and right
    if right["y"] >= left["y"] + left["height"] - 1 and abs(right["x"] - left["x"]) < 2:
        return "stacked"
    if abs(right["y"] - left["y"]) < 2 and right["x"] >= left["x"] + left["width"]:
        return "side by side"
    return f"neither: {left} {right}"


@pytest.mark.parametrize("size", SIZES)
def test_a_new_annotator_asks_two_questions_ranks_them_and_finishes(
    celery_workers: WorkerPool, live_server: Any, browser: Browser, screenshots: Path, size: str
) -> None:
    started = time.monotonic()
    celery_workers.start("journey")
    with openai_standin(responder, delay=1.0) as standin:
        study = open_study(standin.base_url)
        token = invitation_create_bulk(study=study, count=1)[0].token
        context = new_context(browser, size, base_url=live_server.url)
        page = context.new_page()
        page.set_default_timeout(15_000)
        seen: list[tuple[str, list[list[str]]]] = []
        record_progress(page, seen)
        status_replies: list[str] = []
        page.on("response", lambda response: status_reply(response, status_replies))
        journey = Journey(page, study, Camera(screenshots, "annotator", size))

        # Invitation and consent.
        page.goto(f"/join/{token}/")
        expect(page.get_by_role("heading", name="Welcome")).to_be_visible()
        journey.assert_blind()
        journey.shot("join")
        page.get_by_role("button", name="Start").click()
        expect(page.locator("#consent-error")).to_have_text("Please confirm that you agree to take part.")
        page.get_by_label("I have read the information above and agree to take part.").check()
        page.get_by_role("button", name="Start").click()

        # Persona questionnaire: an empty submit shows errors; a partial one keeps what was typed.
        expect(page.get_by_role("heading", name="About you")).to_be_visible()
        journey.shot("persona")
        page.get_by_role("button", name="Save and continue").click()
        expect(page.locator(".field.has-error")).to_have_count(4)
        expect(page.locator(".error").first).to_have_text("This field is required.")
        page.get_by_label("Your role").fill("practising nurse")
        page.get_by_label("Your domain").fill("intensive care")
        page.get_by_label("Research or work area (optional)").fill("patient safety")
        page.get_by_role("button", name="Save and continue").click()
        expect(page.locator(".field.has-error")).to_have_count(2)  # expertise and use case
        expect(page.get_by_label("Your role")).to_have_value("practising nurse")
        expect(page.get_by_label("Your domain")).to_have_value("intensive care")
        expect(page.get_by_label("Research or work area (optional)")).to_have_value("patient safety")
        journey.shot("persona-errors")
        page.get_by_label("Intermediate: some background").check()
        page.get_by_label("What will you use the answers for?").fill("organising night shifts on my ward")
        page.get_by_role("button", name="Save and continue").click()

        # Question 1: asked, generated live, ranked in three comparisons.
        journey.ask(1, QUESTIONS[0])
        assert_progress_was_live(seen, 1)
        ab = journey.expect_match(1, 1, 3)
        journey.shot("q1-compare")
        page.locator("article.summary a.cite").first.click()
        expect(page).to_have_url(re.compile(r"/q/1/compare/#source-\d+$"))
        # On a phone the right summary is the bottom one, and the button says so.
        journey.choose(button="Bottom is better" if size == "phone" else "Right is better", expected="right")

        cd = journey.expect_match(1, 2, 3)
        assert cd != ab
        page.reload()  # a reload shows the same comparison, and no answer is lost
        assert journey.expect_match(1, 2, 3) == cd
        # Back, even to the page where the first comparison was shown, offers the current comparison,
        # ready to answer; forward again changes nothing.
        for move in (page.go_back, page.go_back, page.go_forward, page.go_forward):
            move()
            assert journey.expect_match(1, 2, 3) == cd
            expect(page.get_by_role("button", name=re.compile("(Left|Top) is better"))).to_be_enabled()
        assert Judgment.objects.filter(match_id=ab).count() == 1
        journey.choose(key="1", expected="left")

        final = journey.expect_match(1, 3, 3)
        assert final not in (ab, cd)
        journey.choose(key="ArrowLeft", expected="left")

        # Question 2: a "neither" in the first round skips the final.
        journey.ask(2, QUESTIONS[1])
        assert_progress_was_live(seen, 2)
        journey.expect_match(2, 1, 3)
        # On a phone the two summaries stack; on a desktop they sit side by side.
        journey.shot("q2-compare")
        assert layout_of_summaries(page) == ("stacked" if size == "phone" else "side by side")
        if size == "desktop":  # the same comparison opened on a phone by the same annotator
            phone = new_context(browser, "phone", base_url=live_server.url, storage_state=context.storage_state())
            mobile = phone.new_page()
            mobile.goto(f"/study/{study.slug}/q/2/compare/")
            assert journey.match_id(mobile) == journey.match_id()
            assert layout_of_summaries(mobile) == "stacked"
            journey.assert_blind(mobile)
            phone.close()
        if size == "phone":  # on a touch screen: a tap rather than a key
            journey.choose(button="Neither", expected="neither")
        else:
            journey.choose(key="n", expected="neither")
        # After a "neither" the final cannot happen; the label still counts it (see the report).
        journey.expect_match(2, 2, "2|3")
        journey.choose(key="2", expected="right")

        # Question 3 is offered; the annotator stops instead.
        expect(page.locator(".progress-label")).to_have_text("Question 3 of 8")
        page.get_by_role("button", name="Stop and finish the study").click()
        expect(page.get_by_role("heading", name="Thank you!")).to_be_visible()
        expect(page.locator(".lead")).to_contain_text("2 questions")
        code = page.locator("#completion-code").inner_text().strip()
        journey.assert_blind()
        journey.shot("done")
        context.close()

    # What the database holds.
    participation = Participation.objects.get(study=study)
    assert participation.completion_code == code and participation.completed_at is not None
    queries = list(participation.queries.order_by("index"))
    assert [(q.index, q.text, q.status) for q in queries] == [
        (1, QUESTIONS[0], Query.Status.RANKED),
        (2, QUESTIONS[1], Query.Status.RANKED),
    ]
    judgments = Judgment.objects.filter(match__bracket__query__participation=participation).select_related("match")
    assert {j.match_id: j.choice for j in judgments} == journey.answers
    assert [judgments.filter(match__bracket__query=q).count() for q in queries] == [3, 2]
    elapsed = time.monotonic() - started
    for judgment in judgments:
        assert 0 < judgment.seconds_on_page < elapsed
        assert judgment.shown_at <= judgment.answered_at
    skipped = Match.objects.get(bracket__query=queries[1], label="final")
    assert skipped.status == Match.Status.SKIPPED and not Judgment.objects.filter(match=skipped).exists()
    first_final = Match.objects.get(bracket__query=queries[0], label="final")
    winners = {j.winner_id for j in judgments if j.match.bracket.query_id == queries[0].pk and j.match.round == 1}
    assert {first_final.left_id, first_final.right_id} == winners
    assert all(q.candidates.filter(status="done").count() == 4 for q in queries)
    # The waiting page's polling said nothing about systems either.
    assert status_replies and not any(
        name.lower() in reply.lower() for reply in status_replies for name in journey.forbidden
    )
