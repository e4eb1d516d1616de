"""The annotator's choices on the pages: the tie button and its key, the comment box, the instructions during
the task, the final labelled as the final, the identical-summaries notice, and the practice round."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Judgment, Match, Query
from studies.models import Study
from tests.annotation.factories import PERSONA, StudyFactory
from tests.annotation.test_choices import SAME, _standin_study
from tests.support.openai_standin import openai_standin

pytestmark = pytest.mark.django_db


def _start(client: Client, study: Study, capture) -> str:
    """Join, describe oneself, skip nothing, ask one question; returns the comparison page's URL."""
    from studies.services.invitation import invitation_create_bulk

    token = invitation_create_bulk(study=study, count=1)[0].token
    assert client.post(reverse("annotation:join", args=[token]), {"consent": "on"}).status_code == 302
    assert client.post(reverse("annotation:profile", args=[study.slug]), PERSONA).status_code == 302
    page = client.get(reverse("annotation:ask", args=[study.slug])).content.decode()
    client_token = re.search(r'name="client_token" value="([0-9a-f]+)"', page).group(1)
    with capture(execute=True):
        client.post(
            reverse("annotation:ask", args=[study.slug]),
            {"text": "Night shifts and sleep?", "client_token": client_token},
        )
    return reverse("annotation:compare", args=[study.slug, 1])


def _pending(study: Study) -> Match:
    return Match.objects.filter(bracket__query__participation__study=study, status="pending").order_by(
        "round", "index"
    )[0]


def test_ties_comments_instructions_and_the_final_on_the_comparison_page(client, django_capture_on_commit_callbacks):
    study = StudyFactory(
        slug="ties", allow_ties=True, comments=Study.Comments.MATCH, instructions="Think of your own ward."
    )
    compare = _start(client, study, django_capture_on_commit_callbacks)
    html = client.get(compare).content.decode()
    assert re.search(r'<button[^>]*value="tie"[^>]*data-key="t,="', html)
    assert "Both equally good" in html and 'name="comment"' in html
    assert '<details class="study-instructions"' in html and "Think of your own ward." in html
    assert "Final comparison" not in html and "Comparison 1 of 3" in html
    first = _pending(study)
    response = client.post(compare, {"match_id": first.pk, "choice": "tie", "comment": "Both say the same."})
    assert response.status_code == 302
    judgment = Judgment.objects.get(match=first)
    assert (judgment.choice, judgment.comment) == ("tie", "Both say the same.")
    client.post(compare, {"match_id": _pending(study).pk, "choice": "left", "comment": ""})
    final_page = client.get(compare).content.decode()
    assert 'id="final-label"' in final_page and "Final comparison" in final_page
    assert "Comparison 3 of 3" in final_page  # the progress stays, beside the label


def test_a_comment_filled_to_the_limit_with_line_breaks_is_taken_and_a_longer_one_keeps_the_choice_possible(
    client, django_capture_on_commit_callbacks
):
    study = StudyFactory(slug="notes", comments=Study.Comments.MATCH)
    compare = _start(client, study, django_capture_on_commit_callbacks)
    assert 'maxlength="2000"' in client.get(compare).content.decode()
    # What the browser lets into the box (2000 characters, a line break counted as one) it sends with CRLFs.
    in_the_box = ("I liked the first paragraph.\n" * 69)[:2000]
    match = _pending(study)
    sent = client.post(compare, {"match_id": match.pk, "choice": "left", "comment": in_the_box.replace("\n", "\r\n")})
    assert sent.status_code == 302
    assert Judgment.objects.get(match=match).comment == in_the_box.strip()  # stored with LF line breaks
    # Longer than the box allows (a client past the browser's limit): refused on the same comparison, the
    # comment still in its box, so that nothing typed is lost and the choice can be made again.
    match = _pending(study)
    too_long = "Line one.\r\n" + "x" * 2000
    refused = client.post(compare, {"match_id": match.pk, "choice": "right", "comment": too_long})
    page = refused.content.decode()
    assert refused.status_code == 400 and f'name="match_id" value="{match.pk}"' in page
    assert "Your choice was not recorded: Ensure this value has at most 2000 characters (it has 2010)." in page
    assert "Line one.\n" + "x" * 2000 + "</textarea>" in page
    assert not Judgment.objects.filter(match=match).exists()
    assert client.post(compare, {"match_id": match.pk, "choice": "right", "comment": "Shorter."}).status_code == 302
    assert Judgment.objects.get(match=match).comment == "Shorter."


def test_a_study_without_ties_or_comments_offers_neither(client, django_capture_on_commit_callbacks):
    study = StudyFactory(slug="plain")
    compare = _start(client, study, django_capture_on_commit_callbacks)
    html = client.get(compare).content.decode()
    assert 'value="tie"' not in html and 'name="comment"' not in html
    match = _pending(study)
    refused = client.post(compare, {"match_id": match.pk, "choice": "tie"})
    assert refused.status_code == 400 and "does not offer" in refused.content.decode()
    # A comment posted anyway (no box was shown), even one past the box's limit, is not kept; the choice is.
    client.post(compare, {"match_id": match.pk, "choice": "left", "comment": "sneaky" * 400})
    assert Judgment.objects.get(match=match).comment == ""


def test_identical_summaries_come_with_a_notice_that_names_no_system(client, django_capture_on_commit_callbacks):
    with openai_standin(lambda body: SAME) as server:
        study = _standin_study(server.base_url, Study.IdenticalPolicy.NOTICE)
        study.slug = "same"
        study.save(update_fields=["slug"])
        compare = _start(client, study, django_capture_on_commit_callbacks)
    html = client.get(compare).content.decode()
    notice = re.search(r'<section class="card notice" role="status" id="identical-notice">(.*?)</section>', html, re.S)
    assert notice and "These two summaries are identical." in notice.group(1)
    for secret in ("alpha", "beta", "persona", "generic"):
        assert secret not in notice.group(1).lower()


def test_the_practice_round_comes_first_gives_feedback_and_stores_nothing(client, django_capture_on_commit_callbacks):
    from studies.services.invitation import invitation_create_bulk

    study = StudyFactory(slug="practice", practice_round=True)
    token = invitation_create_bulk(study=study, count=1)[0].token
    client.post(reverse("annotation:join", args=[token]), {"consent": "on"})
    client.post(reverse("annotation:profile", args=["practice"]), PERSONA)
    practice = reverse("annotation:practice", args=["practice"])
    assert client.get(reverse("annotation:study", args=["practice"]))["Location"] == practice
    assert client.get(reverse("annotation:ask", args=["practice"]))["Location"] == practice
    page = client.get(practice).content.decode()
    assert "Practice comparison" in page and "not recorded" in page and 'id="practice-feedback"' not in page
    feedback = client.post(practice, {"choice": "right"}).content.decode()
    assert "Have another look." in feedback and "The left (top) summary is the better choice" in feedback
    assert not Query.objects.exists() and not Judgment.objects.exists()
    # Done once: the router now goes to the first question, and the practice page sends back to it.
    assert client.get(reverse("annotation:study", args=["practice"]))["Location"].endswith("/ask/")
    assert client.get(practice)["Location"] == reverse("annotation:study", args=["practice"])
