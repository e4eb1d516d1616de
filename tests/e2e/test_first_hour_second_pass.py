"""Issue 33 in the browser, at desktop and phone sizes: the question's length counted as it is typed (and
announced politely), an over-long question refused whole, the resume link's copy button, a word when a
question is finished, the German practice page, and the icon every page asks for. Each page is checked with
axe and photographed into SCREENS for the lead's note."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from studies.models import Study
from studies.services.invitation import invitation_create_bulk
from tests.annotation.factories import StudyFactory
from tests.e2e import a11y
from tests.e2e.steps import arrive_and_describe_yourself
from tests.e2e.viewports import SIZES, assert_fits, new_context

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

SCREENS = Path("/work/notes/screens")


def _shot(page: Page, name: str, size: str) -> None:
    SCREENS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENS / f"{name}-{size}.png"), full_page=True)
    if size == "phone":
        assert_fits(page, name)


def _arrive(browser: Browser, live_server: Any, study: Study, size: str) -> Page:
    context = new_context(browser, size, base_url=live_server.url)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    return arrive_and_describe_yourself(browser, live_server, study, context=context, timeout_ms=20_000)


@pytest.mark.parametrize("size", list(SIZES))
def test_the_question_page_counts_refuses_whole_copies_the_link_and_says_when_a_question_is_done(
    browser: Browser, live_server: Any, size: str
) -> None:
    study = StudyFactory(slug=f"count-{size}", max_query_chars=1000, min_ranked_questions=1)
    page = _arrive(browser, live_server, study, size)
    box = page.get_by_label("Your question")
    counter = page.locator("#id_text-count")
    live = page.locator("#id_text-count-live")
    expect(counter).to_have_text("0 of 1000 characters")
    box.press_sequentially("Night shifts?")
    expect(counter).to_have_text("13 of 1000 characters")
    expect(live).to_have_text("13 of 1000 characters")  # announced once the typing pauses
    a11y.assert_accessible(page, f"ask ({size})")
    _shot(page, "ask-counter", size)

    # A pasted question over the limit is kept whole: the count says by how much, at once and aloud.
    long_text = "How do rotating night shifts affect the sleep and health of hospital nurses? " * 14
    box.fill(long_text)
    over = len(long_text) - 1000
    message = f"{over} characters over the limit of 1000: please shorten your question"
    expect(counter).to_have_text(message)
    expect(counter).to_have_class("help char-count error")
    expect(live).to_have_text(message)
    assert box.input_value() == long_text
    _shot(page, "ask-too-long", size)
    page.get_by_role("button", name="Find and summarise").click()
    expect(page.locator("main")).to_contain_text(
        f"Please keep your question under 1000 characters (it has {len(long_text.strip())})."
    )
    assert box.input_value() == long_text  # nothing lost
    a11y.assert_accessible(page, f"ask refused ({size})")
    _shot(page, "ask-refused", size)

    # The resume link: whole on screen and copied by its button.
    link = page.locator("#resume-link")
    link.scroll_into_view_if_needed()
    box_of_link = link.bounding_box()
    assert box_of_link is not None and box_of_link["x"] + box_of_link["width"] <= SIZES[size]["viewport"]["width"]
    page.get_by_role("button", name="Copy link").click()
    expect(page.locator("#resume-copy-status")).to_have_text("Link copied")
    assert page.evaluate("navigator.clipboard.readText()") == link.input_value()
    _shot(page, "ask-resume-copied", size)

    # A question answered to its end says so before the next question's page.
    box.fill("How do night shifts affect nurses' sleep?")
    page.get_by_role("button", name="Find and summarise").click()
    for _ in range(3):
        page.get_by_role("button", name="is better").first.click()
        page.wait_for_load_state("load")
    expect(page.locator("main")).to_contain_text(
        "Thank you: your comparisons for the question “How do night shifts affect nurses' sleep?” are complete"
    )
    expect(page.locator("main")).to_contain_text("you have earned your completion code")
    a11y.assert_accessible(page, f"question done ({size})")
    _shot(page, "question-done", size)

    # Every page asks for /favicon.ico: it is an icon, not a 404.
    icon = page.request.get(f"{live_server.url}/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"] in ("image/x-icon", "image/vnd.microsoft.icon")


@pytest.mark.parametrize("size", list(SIZES))
def test_the_german_practice_page_says_linke_and_quotes_in_german(
    browser: Browser, live_server: Any, size: str
) -> None:
    study = StudyFactory(slug=f"uebung-{size}", practice_round=True, language="de")
    token = invitation_create_bulk(study=study, count=1)[0].token
    context = new_context(browser, size, base_url=live_server.url)
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(f"/join/{token}/")
    page.locator("input[name=consent]").check()
    page.get_by_role("button", name="Starten").click()
    page.locator("#id_role").fill("Pflegekraft")
    page.locator("#id_domain").fill("Intensivpflege")
    page.locator("input[name=expertise]").first.check()
    page.locator("#id_use_case").fill("Nachtdienste planen")
    page.locator("form button[type=submit]").first.click()
    page.wait_for_url("**/practice/")
    heading = page.locator("#practice-left-title")
    expected = "LINKE ZUSAMMENFASSUNG" if size == "desktop" else "OBERE ZUSAMMENFASSUNG"
    # As shown (the headings are upper-cased by the stylesheet), the one term the comparison page uses too.
    assert heading.inner_text().strip().upper() == expected
    quote = page.locator(".query-quote").inner_text()
    assert quote.startswith("Die Frage: „") and quote.rstrip().endswith("“")
    a11y.assert_accessible(page, f"practice de ({size})")
    _shot(page, "practice-de", size)
