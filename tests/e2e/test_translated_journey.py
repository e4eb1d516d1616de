"""A study run in German, in headless Chromium: consent, persona, a question, the waiting page with its live
status (no worker runs: the test does the background work itself, step by step, while the page polls), the
comparison and a choice, each page in German with <html lang="de">; an English study in the same browser
stays English. The expected words are written here, not read from the catalog."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from annotation.models import Judgment, Query
from annotation.services.generation import candidate_generate
from annotation.services.query import query_retrieve
from studies.models import Study
from studies.services.invitation import invitation_create_bulk
from tests.annotation.factories import StudyFactory
from tests.integration.worker import WorkerPool

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.timeout(90)]

# What an annotator must never read: the systems' models or conditions.
SYSTEM_WORDS = re.compile(r"extractive|centroid|mmr|persona|generic", re.IGNORECASE)


def test_a_german_study_in_german_from_consent_to_a_choice_and_an_english_one_in_english(
    celery_workers: WorkerPool, live_server: Any, browser: Browser
) -> None:
    # Tasks go to the real broker and no worker takes them, so the waiting page stays up until the test
    # retrieves and generates below.
    study = StudyFactory(
        slug="schlaf",
        title="Schlaf im Schichtdienst",
        consent_text="Ihre Antworten werden unter einem Pseudonym gespeichert.",
        language="de",
    )
    english = StudyFactory(slug="sleep", title="Sleep and shift work")
    context = browser.new_context(base_url=live_server.url)
    page = context.new_page()
    page.set_default_timeout(15_000)
    html = page.locator("html")

    # Consent: the page's own words in German, the designer's consent text as written.
    page.goto(f"/join/{invitation_create_bulk(study=study, count=1)[0].token}/")
    expect(html).to_have_attribute("lang", "de")
    expect(page.get_by_role("heading", level=1)).to_have_text("Willkommen")
    expect(page.get_by_role("heading", name="Einwilligung")).to_be_visible()
    expect(page.locator("main")).to_contain_text("Ihre Antworten werden unter einem Pseudonym gespeichert.")
    expect(page.get_by_role("link", name="Zum Inhalt springen")).to_be_attached()
    page.get_by_role("button", name="Starten").click()
    expect(page.locator("#consent-error")).to_have_text(
        "Bitte bestätigen Sie, dass Sie mit der Teilnahme einverstanden sind."
    )
    page.get_by_label("Ich habe die obigen Informationen gelesen und bin mit der Teilnahme einverstanden.").check()
    page.get_by_role("button", name="Starten").click()

    # Persona.
    expect(page.get_by_role("heading", level=1)).to_have_text("Über Sie")
    expect(html).to_have_attribute("lang", "de")
    page.get_by_label("Ihre Rolle").fill("Pflegefachkraft")
    page.get_by_label("Ihr Fachgebiet").fill("Intensivpflege")
    page.get_by_label("Fortgeschritten: etwas Vorwissen").check()
    page.get_by_label("Wofür werden Sie die Antworten verwenden?").fill("Nachtdienste planen")
    page.get_by_role("button", name="Speichern und weiter").click()

    # The question page.
    expect(page.get_by_role("heading", level=1)).to_have_text("Frage 1 von 8")
    expect(page.get_by_role("link", name="Studie beenden")).to_be_visible()
    page.get_by_label("Ihre Frage").fill("Wie wirkt sich Nachtarbeit auf den Schlaf von Pflegekräften aus?")
    page.get_by_role("button", name="Suchen und zusammenfassen").click()

    # The waiting page, then its live updates as the work gets done.
    expect(page).to_have_url(re.compile(r"/q/1/wait/$"))
    expect(html).to_have_attribute("lang", "de")
    expect(page.get_by_role("heading", level=1)).to_have_text("Ihre Zusammenfassungen werden geschrieben")
    message = page.locator("#wait-message")
    expect(message).to_have_text("Relevante Abstracts von Fachartikeln werden gesucht…")
    query = Query.objects.get(participation__study=study)
    query_retrieve(query_id=query.pk)
    expect(message).to_have_text("0 von 4 Zusammenfassungen fertig. Diese Seite aktualisiert sich von selbst.")
    expect(page.locator("#generation-list li").first).to_have_text("Zusammenfassung 1: wartet")
    candidates = list(query.candidates.order_by("pk"))
    candidate_generate(candidate_id=candidates[0].pk)
    expect(message).to_have_text("1 von 4 Zusammenfassungen fertig. Diese Seite aktualisiert sich von selbst.")
    expect(page.locator("#generation-list li").first).to_have_text("Zusammenfassung 1: fertig")
    for candidate in candidates[1:]:
        candidate_generate(candidate_id=candidate.pk)

    # The comparison, and a choice.
    expect(page).to_have_url(re.compile(r"/q/1/compare/$"))
    expect(html).to_have_attribute("lang", "de")
    progress = page.locator(".progress-label")
    expect(progress).to_have_text("Frage 1 von 8 · Vergleich 1 von 3")
    main = page.locator("main")
    expect(main).to_contain_text("Welche Zusammenfassung beantwortet Ihre Frage für Ihre Zwecke besser?")
    expect(page.get_by_role("heading", name="Linke Zusammenfassung")).to_be_visible()
    expect(page.get_by_role("heading", name="Quellen")).to_be_visible()
    expect(page.get_by_role("button", name="Keine erfüllt meinen Bedarf K")).to_be_visible()
    assert not SYSTEM_WORDS.search(main.inner_text())
    page.locator("#choice-form[data-ready]").wait_for(state="attached")
    page.get_by_role("button", name="◀ Links ist besser").click()
    expect(progress).to_have_text("Frage 1 von 8 · Vergleich 2 von 3")
    page.locator("#choice-form[data-ready]").wait_for(state="attached")
    page.keyboard.press("k")  # the German key for "Keine" (neither)
    expect(page.get_by_role("heading", level=1)).to_have_text("Frage 2 von 8")
    assert list(Judgment.objects.order_by("answered_at").values_list("choice", flat=True)) == ["left", "neither"]

    # The study's language is the study's: an English study in the same browser is English.
    page.goto(f"/join/{invitation_create_bulk(study=english, count=1)[0].token}/")
    expect(html).to_have_attribute("lang", "en")
    expect(page.get_by_role("heading", level=1)).to_have_text("Welcome")
    expect(page.get_by_role("button", name="Start", exact=True)).to_be_visible()
    context.close()
    assert Study.objects.get(pk=english.pk).language == "en"
