"""Issue 33, what a newcomer met on the annotator pages: a question over the limit refused with a form error
(never cut), a word when a question is finished and when the code is earned, the plural of failed summaries,
the German practice and comparison pages' terms and quotation marks, and /favicon.ico."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import translation

from annotation.models import Match, Query
from annotation.selectors.query import query_wait_state
from studies.models import Study
from tests.annotation.factories import PERSONA, StudyFactory

pytestmark = pytest.mark.django_db


def _arrive(client: Client, study: Study) -> None:
    from studies.services.invitation import invitation_create_bulk

    token = invitation_create_bulk(study=study, count=1)[0].token
    assert client.post(reverse("annotation:join", args=[token]), {"consent": "on"}).status_code == 302
    assert client.post(reverse("annotation:profile", args=[study.slug]), PERSONA).status_code == 302


def _ask(client: Client, study: Study, capture, text: str):  # type: ignore[no-untyped-def]
    page = client.get(reverse("annotation:ask", args=[study.slug])).content.decode()
    token = re.search(r'name="client_token" value="([0-9a-f]+)"', page).group(1)  # type: ignore[union-attr]
    with capture(execute=True):
        return client.post(reverse("annotation:ask", args=[study.slug]), {"text": text, "client_token": token})


def test_a_question_over_the_limit_is_refused_whole_with_its_length_and_the_limit(
    client: Client, django_capture_on_commit_callbacks
) -> None:
    study = StudyFactory(slug="long", max_query_chars=1000)
    _arrive(client, study)
    page = client.get(reverse("annotation:ask", args=["long"])).content.decode()
    # The box does not cut a pasted question at the limit; the page says the limit and counts (app.js).
    assert "maxlength" not in re.search(r"<textarea[^>]*>", page).group(0)  # type: ignore[union-attr]
    assert 'data-max-chars="1000"' in page and "At most 1000 characters." in page
    assert 'aria-describedby="id_text-help id_text-count"' in page and 'aria-live="polite"' in page

    text = "Which automatic metrics agree with human judgements of summary quality? " * 17  # 1,241 characters
    refused = _ask(client, study, django_capture_on_commit_callbacks, text)
    html = unescape(refused.content.decode())
    assert refused.status_code == 400
    assert f"Please keep your question under 1000 characters (it has {len(text.strip())})." in html
    assert text.strip() in html  # all of it, to shorten
    assert not Query.objects.exists()

    taken = _ask(client, study, django_capture_on_commit_callbacks, text[:1000])
    assert taken.status_code == 302 and Query.objects.get().text == text[:1000].strip()


def _answer_all(client: Client, study: Study) -> list[str]:
    """Answer every pending comparison of the study's one annotator; the messages shown after each answer."""
    said: list[str] = []
    pending = Match.objects.filter(bracket__query__participation__study=study, status="pending")
    while match := pending.select_related("bracket__query").order_by("round", "index").first():
        compare = reverse("annotation:compare", args=[study.slug, match.bracket.query.index])
        response = client.post(compare, {"match_id": match.pk, "choice": "left", "comment": ""}, follow=True)
        assert response.status_code == 200
        said.append(" | ".join(str(m) for m in response.context["messages"]))
    return said


def test_the_answer_that_finishes_a_question_says_so_and_the_one_that_earns_the_code_too(
    client: Client, django_capture_on_commit_callbacks
) -> None:
    study = StudyFactory(slug="word", min_ranked_questions=1)
    _arrive(client, study)
    _ask(client, study, django_capture_on_commit_callbacks, "How do night shifts affect nurses' sleep?")
    said = _answer_all(client, study)
    assert len(said) == 3
    assert said[:2] == ["", ""]  # the first round: the page just moves on to the next comparison
    assert "Thank you: your comparisons for the question “How do night shifts affect nurses' sleep?” are" in said[2]
    assert "You have compared the summaries of 1 question: you have earned your completion code." in said[2]
    assert Query.objects.get().status == Query.Status.RANKED

    # The second question is finished too, but the code was earned already: no second word about it.
    _ask(client, study, django_capture_on_commit_callbacks, "Does remote patient monitoring help at home?")
    said = _answer_all(client, study)
    assert "Thank you: your comparisons for the question" in said[-1]
    assert "completion code" not in said[-1]


def test_two_failed_summaries_are_two_in_english_and_in_german(django_capture_on_commit_callbacks) -> None:
    from annotation.services.query import query_submit
    from tests.annotation.factories import join

    study = StudyFactory(slug="fails")
    query = query_submit(participation=join(study), text="Night shifts and sleep?", client_token="")
    progress = [{"status": s} for s in ("done", "failed", "failed", "done")]
    one = [{"status": s} for s in ("done", "failed", "done", "done")]
    assert query_wait_state(query=query, progress=progress).message == (
        "Something went wrong: 2 of the summaries could not be written."
    )
    assert query_wait_state(query=query, progress=one).message == (
        "Something went wrong: one of the summaries could not be written."
    )
    with translation.override("de"):
        assert query_wait_state(query=query, progress=progress).message == (
            "Etwas ist schiefgelaufen: 2 der Zusammenfassungen konnten nicht geschrieben werden."
        )
        assert query_wait_state(query=query, progress=one).message == (
            "Etwas ist schiefgelaufen: Eine der Zusammenfassungen konnte nicht geschrieben werden."
        )


def test_the_german_practice_page_names_the_summaries_as_the_comparison_page_does(client: Client) -> None:
    study = StudyFactory(slug="uebung", practice_round=True, language="de")
    _arrive(client, study)
    page = unescape(client.get(reverse("annotation:practice", args=["uebung"])).content.decode())
    text = re.sub(r"<[^>]+>", "", page)
    assert "Linke Zusammenfassung" in text or "LinkeObere Zusammenfassung" in text
    assert '<span class="wide-only">Linke</span><span class="narrow-only">Obere</span> Zusammenfassung' in page
    assert '<span class="wide-only">Rechte</span><span class="narrow-only">Untere</span> Zusammenfassung' in page
    assert "Links Zusammenfassung" not in text and ">Links</span>" not in page
    # German quotation marks around the example question, never English ones.
    quote = re.search(r'<p class="query-quote">([^<]*)</p>', page).group(1)  # type: ignore[union-attr]
    assert quote.startswith("Die Frage: „") and quote.endswith("“") and "”" not in quote


def test_favicon_ico_leads_to_the_static_icon(client: Client) -> None:
    response = client.get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"].endswith("/static/favicon.ico")


def test_the_api_docs_name_the_system_counts_the_code_opens_a_study_with() -> None:
    """docs/api.md said 2, 4 or 8 systems while the code took 16 too (issue 33): held to BRACKET_SIZES."""
    from pathlib import Path

    from studies.services.study import BRACKET_SIZES

    sizes = f"{BRACKET_SIZES[0]} to {BRACKET_SIZES[-1]}"
    docs = " ".join((Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text(encoding="utf-8").split())
    assert f"Opening a study needs {sizes} systems" in docs
