"""The annotator pages over HTTP: what a person clicking through would see, and what they must not."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Judgment, Match, Participation, PersonaProfile, Query
from studies.models import Study
from tests.annotation.factories import PERSONA, StudyFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def study():
    return StudyFactory(slug="sleep")


@pytest.fixture
def invitation(study):
    from studies.services.invitation import invitation_create_bulk

    return invitation_create_bulk(study=study, count=1, max_uses=5)[0]


def _join(client: Client, invitation) -> None:
    response = client.post(reverse("annotation:join", args=[invitation.token]), {"consent": "on"})
    assert response.status_code == 302


def _persona(client: Client) -> None:
    response = client.post(reverse("annotation:profile", args=["sleep"]), PERSONA)
    assert response.status_code == 302


def _ask(client: Client, capture, text="How does night shift work affect nurses' sleep?"):
    page = client.get(reverse("annotation:ask", args=["sleep"]))
    token = re.search(r'name="client_token" value="([0-9a-f]+)"', page.content.decode()).group(1)
    with capture(execute=True):
        return client.post(reverse("annotation:ask", args=["sleep"]), {"text": text, "client_token": token}), token


def test_consent_is_required(client, invitation):
    response = client.post(reverse("annotation:join", args=[invitation.token]), {})
    assert response.status_code == 400
    assert "Please confirm that you agree to take part." in response.content.decode()
    assert not Participation.objects.exists()


def test_expired_and_unknown_links_explain_themselves(client, invitation):
    response = client.get(reverse("annotation:join", args=["not-a-token"]))
    assert response.status_code == 404 and "not valid" in response.content.decode()


def test_the_study_router_walks_the_protocol(client, invitation, django_capture_on_commit_callbacks):
    _join(client, invitation)
    assert client.get(reverse("annotation:study", args=["sleep"]))["Location"].endswith("/profile/")
    empty = client.post(reverse("annotation:profile", args=["sleep"]), {"role": "nurse"})
    assert empty.status_code == 400 and "This field is required." in empty.content.decode()
    _persona(client)
    assert client.get(reverse("annotation:study", args=["sleep"]))["Location"].endswith("/ask/")
    ask_page = client.get(reverse("annotation:ask", args=["sleep"])).content.decode()
    assert "Question 1 of 8" in ask_page
    response, _ = _ask(client, django_capture_on_commit_callbacks)
    assert response["Location"].endswith("/q/1/wait/")
    # Generation ran on commit (eager tasks in tests): the router now goes to the comparison.
    assert client.get(reverse("annotation:study", args=["sleep"]))["Location"].endswith("/q/1/compare/")


def test_comparison_page_is_blind_and_links_citations(client, invitation, django_capture_on_commit_callbacks):
    _join(client, invitation)
    _persona(client)
    _ask(client, django_capture_on_commit_callbacks)
    page = client.get(reverse("annotation:compare", args=["sleep", 1]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "Comparison 1 of 3" in html
    # The CSRF token is random letters and digits, so a system name can turn up inside it by chance: search the
    # page's words, not its random values.
    words = set(re.findall(r"[a-z0-9]+(?:-[a-z0-9]+)*", re.sub(r'value="[A-Za-z0-9]{32,}"', "", html).lower()))
    for secret in ("extractive-centroid", "extractive-mmr", "centroid", "mmr"):
        assert secret not in words and not any(secret in w.split("-") for w in words), secret
    # Outside the summaries' and abstracts' own words, nothing hints at a condition.
    chrome = re.sub(r'<div class="summary-text">.*?</div>|<section class="sources".*?</section>', "", html, flags=re.S)
    for secret in ("persona", "generic", "personali"):
        assert secret not in chrome.lower(), secret
    cited = set(re.findall(r'href="#source-(\d+)"', html))
    assert cited, "summaries should carry citation links"
    assert all(f'id="source-{n}"' in html for n in cited)


def test_reload_and_resubmit_never_duplicate(client, invitation, django_capture_on_commit_callbacks):
    _join(client, invitation)
    _persona(client)
    _, token = _ask(client, django_capture_on_commit_callbacks)
    # The same form posted twice (double click, back + resubmit) is one question.
    with django_capture_on_commit_callbacks(execute=True):
        again = client.post(
            reverse("annotation:ask", args=["sleep"]),
            {"text": "How does night shift work affect nurses' sleep?", "client_token": token},
        )
    assert again.status_code == 302 and Query.objects.count() == 1
    compare = reverse("annotation:compare", args=["sleep", 1])
    match = Match.objects.filter(status="pending").order_by("round", "index").first()
    client.get(compare)
    shown_at = Match.objects.get(pk=match.pk).shown_at
    client.get(compare)  # a reload keeps the first display time
    assert Match.objects.get(pk=match.pk).shown_at == shown_at
    for _ in range(2):
        assert client.post(compare, {"match_id": match.pk, "choice": "left"}).status_code == 302
    assert Judgment.objects.filter(match=match).count() == 1
    # A stale tab answering differently changes nothing.
    client.post(compare, {"match_id": match.pk, "choice": "right"})
    assert Judgment.objects.get(match=match).choice == "left"


def test_a_new_question_typed_into_a_restored_form_is_asked_or_refused_keeping_its_text(
    client, invitation, django_capture_on_commit_callbacks
):
    """The back button restores the question form with its old hidden token, and a new question is typed in."""
    _join(client, invitation)
    _persona(client)
    _, token = _ask(client, django_capture_on_commit_callbacks)
    ask = reverse("annotation:ask", args=["sleep"])
    # While the first question is still being compared: refused on the form, the new question still in it.
    refused = client.post(ask, {"text": "Which shift patterns reduce fatigue?", "client_token": token})
    page = refused.content.decode()
    assert refused.status_code == 400 and "Please finish ranking your current question first." in page
    assert "Which shift patterns reduce fatigue?</textarea>" in page and Query.objects.count() == 1
    compare = reverse("annotation:compare", args=["sleep", 1])
    while (shown := client.get(compare)).status_code == 200:
        match_id = re.search(r'name="match_id" value="(\d+)"', shown.content.decode()).group(1)
        client.post(compare, {"match_id": match_id, "choice": "left"})
    # Once it is ranked: asked as question 2, and the same form sent twice is still one question.
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(2):
            sent = client.post(ask, {"text": "Which shift patterns reduce fatigue?", "client_token": token})
            assert sent["Location"] == reverse("annotation:wait", args=["sleep", 2])
    assert list(Query.objects.order_by("index").values_list("index", "text")) == [
        (1, "How does night shift work affect nurses' sleep?"),
        (2, "Which shift patterns reduce fatigue?"),
    ]
    assert (
        "Which shift patterns reduce fatigue?"
        in client.get(reverse("annotation:compare", args=["sleep", 2])).content.decode()
    )


def test_another_annotators_pages_are_not_found(client, invitation, django_capture_on_commit_callbacks):
    _join(client, invitation)
    _persona(client)
    _ask(client, django_capture_on_commit_callbacks)
    other = Client()
    _join(other, invitation)
    assert other.get(reverse("annotation:compare", args=["sleep", 1])).status_code == 404
    match = Match.objects.first()
    response = other.post(reverse("annotation:compare", args=["sleep", 1]), {"match_id": match.pk, "choice": "left"})
    assert response.status_code == 404
    assert not Judgment.objects.exists()


def test_paused_study_shows_a_notice_and_keeps_answers(client, invitation, django_capture_on_commit_callbacks, study):
    _join(client, invitation)
    _persona(client)
    _ask(client, django_capture_on_commit_callbacks)
    study.status = Study.Status.PAUSED
    study.save()
    page = client.get(reverse("annotation:study", args=["sleep"]))
    assert page.status_code == 403 and "paused" in page.content.decode()
    assert Query.objects.count() == 1


def test_finish_early_gives_a_completion_code(client, invitation, django_capture_on_commit_callbacks):
    _join(client, invitation)
    _persona(client)
    _ask(client, django_capture_on_commit_callbacks)
    compare = reverse("annotation:compare", args=["sleep", 1])
    for choice in ("neither", "neither"):
        match = Match.objects.filter(status="pending").order_by("round", "index").first()
        client.post(compare, {"match_id": match.pk, "choice": choice})
    assert "Question 2 of 8" in client.get(reverse("annotation:ask", args=["sleep"])).content.decode()
    done = client.post(reverse("annotation:finish", args=["sleep"]), follow=True)
    participation = Participation.objects.get()
    assert participation.completion_code and participation.completion_code in done.content.decode()


def test_csrf_is_enforced(invitation):
    strict = Client(enforce_csrf_checks=True)
    response = strict.post(reverse("annotation:join", args=[invitation.token]), {"consent": "on"})
    assert response.status_code == 403
    assert not Participation.objects.exists()


def _edited_persona_sent_from_a_stale_tab_is_refused_showing_what_is_stored(response) -> None:
    page = response.content.decode()
    assert response.status_code == 409
    assert "Your changes were not saved: Your profile is fixed once you have asked your first question." in page
    assert "practising nurse" in page and "secondary-school teacher" not in page and "history" not in page
    assert list(PersonaProfile.objects.values_list("role", "domain")) == [("practising nurse", "intensive care")]


EDITED = {**PERSONA, "role": "secondary-school teacher", "domain": "history"}


def test_a_persona_edit_from_a_tab_opened_before_the_first_question_says_it_was_not_saved(
    client, invitation, django_capture_on_commit_callbacks
):
    _join(client, invitation)
    _persona(client)
    assert client.get(reverse("annotation:profile", args=["sleep"])).status_code == 200  # tab A: the form
    _ask(client, django_capture_on_commit_callbacks)  # tab B asks the first question
    _edited_persona_sent_from_a_stale_tab_is_refused_showing_what_is_stored(
        client.post(reverse("annotation:profile", args=["sleep"]), EDITED)
    )


@pytest.mark.django_db(transaction=True)
def test_a_persona_edit_overtaken_by_a_question_asked_in_another_tab_says_it_was_not_saved(invitation):
    from annotation.services.query import query_submit
    from tests.studies.test_admin_races import after_statement

    client = Client()
    _join(client, invitation)
    _persona(client)
    participation = Participation.objects.get()

    def ask_elsewhere() -> None:
        query_submit(participation=participation, text="Night shifts and sleep?", client_token="tab-b")

    # Tab B's question lands after the page checked that none was asked, before the edit is saved.
    def checked(sql: str) -> bool:
        return sql.startswith('SELECT %s AS "a" FROM "annotation_query"')

    with after_statement(checked, ask_elsewhere) as seen:
        response = client.post(reverse("annotation:profile", args=["sleep"]), EDITED)
    assert seen and Query.objects.count() == 1
    _edited_persona_sent_from_a_stale_tab_is_refused_showing_what_is_stored(response)


def test_a_question_and_a_profile_filled_to_their_limit_with_line_breaks_are_taken(
    client, invitation, django_capture_on_commit_callbacks
):
    """A browser counts a line break as one character against a box's maxlength, and sends it as CRLF."""
    _join(client, invitation)
    use_case = ("Advising patients.\n" * 60)[:1000]
    saved = client.post(
        reverse("annotation:profile", args=["sleep"]), {**PERSONA, "use_case": use_case.replace("\n", "\r\n")}
    )
    assert saved.status_code == 302 and PersonaProfile.objects.get().use_case == use_case.strip()
    question = ("Night shifts and sleep?\n" * 50)[:1000]
    sent, _ = _ask(client, django_capture_on_commit_callbacks, text=question.replace("\n", "\r\n"))
    assert sent.status_code == 302 and Query.objects.get().text == question.strip()


def test_a_question_of_invisible_characters_is_refused_like_an_empty_one(
    client, invitation, django_capture_on_commit_callbacks
):
    _join(client, invitation)
    _persona(client)
    refused, _ = _ask(client, django_capture_on_commit_callbacks, text="\u200b\ufeff\u2060")
    assert refused.status_code == 400 and "Please write your question." in refused.content.decode()
    assert not Query.objects.exists()


def test_a_joined_annotator_opening_their_expired_or_deleted_invitation_gets_back_to_their_study(
    client, invitation, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    from django.utils import timezone

    from studies.models import Invitation

    _join(client, invitation)
    _persona(client)
    _ask(client, django_capture_on_commit_callbacks)
    join = reverse("annotation:join", args=[invitation.token])
    Invitation.objects.filter(pk=invitation.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    assert client.get(join)["Location"] == reverse("annotation:study", args=["sleep"])
    assert Client().get(join).status_code == 410  # anyone else is still told it has expired
    Invitation.objects.filter(pk=invitation.pk).delete()
    gone = client.get(join)
    assert gone.status_code == 404 and "not valid" in gone.content.decode()
    assert 'href="/study/sleep/"' in gone.content.decode()  # their study, to go back to
    assert Query.objects.count() == 1
