"""A study's language: set and checked through the service, the admin API and the admin form; its annotator
pages, notices, form errors, error pages and the waiting page's status poll speak it, while the next request
(another study's page, a researcher's) is back in English."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Query
from annotation.services.query import NO_MATCH_NOTE
from kernel.exceptions import ApplicationError
from studies.models import Study
from studies.services.invitation import invitation_create_bulk
from studies.services.study import study_create, study_update
from tests.annotation.factories import PERSONA, StudyFactory

pytestmark = pytest.mark.django_db


def test_a_study_is_english_unless_set_and_refuses_an_unknown_language():
    assert StudyFactory().language == "en"
    study = StudyFactory(language="de")
    assert Study.objects.get(pk=study.pk).language == "de"
    with pytest.raises(ApplicationError) as refused:
        study_create(slug="fr", title="French", language="fr")
    assert refused.value.field == "language"
    assert refused.value.message == "Unknown language 'fr'; choose one of en, de."
    with pytest.raises(ApplicationError):
        study_update(study=study, language="")
    assert Study.objects.get(pk=study.pk).language == "de"


def test_the_admin_api_sets_the_language_and_answers_a_bad_one_with_400_naming_it():
    api = APIClient()
    api.force_authenticate(get_user_model().objects.create_superuser("root", "root@example.org", "pw"))
    created = api.post("/api/v1/admin/studies/", {"slug": "de", "title": "Schlaf", "language": "de"}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["language"] == "de"
    refused = api.patch("/api/v1/admin/studies/de/", {"language": "klingon"}, format="json")
    assert refused.status_code == 400
    assert "klingon" in " ".join(refused.json()["extra"]["fields"]["language"])
    assert Study.objects.get(slug="de").language == "de"


def test_the_admin_api_refuses_an_unknown_language_in_the_services_words():
    api = APIClient()
    api.force_authenticate(get_user_model().objects.create_superuser("root", "root@example.org", "pw"))
    StudyFactory(slug="s1")
    with pytest.raises(ApplicationError) as service:
        study_create(slug="fr", title="French", language="fr")
    for refused in (
        api.patch("/api/v1/admin/studies/s1/", {"language": "fr"}, format="json"),
        api.post("/api/v1/admin/studies/", {"slug": "fr", "title": "French", "language": "fr"}, format="json"),
    ):
        assert refused.status_code == 400
        assert refused.json() == {
            "message": "Validation error",
            "extra": {"fields": {"language": ["Unknown language 'fr'; choose one of en, de."]}},
        }
        assert refused.json()["extra"]["fields"]["language"] == [service.value.message]
    assert Study.objects.get(slug="s1").language == "en"


def test_the_admin_form_offers_the_languages_by_name():
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("root", "root@example.org", "pw"))
    page = admin.get(reverse("admin:studies_study_add")).content.decode()
    assert '<option value="de">Deutsch</option>' in page
    assert '<option value="en" selected>English</option>' in page


def _joined(study: Study) -> Client:
    client = Client()
    token = invitation_create_bulk(study=study, count=1)[0].token
    assert client.post(reverse("annotation:join", args=[token]), {"consent": "on"}).status_code == 302
    return client


def test_a_german_study_speaks_german_on_every_kind_of_page_and_the_next_request_is_english_again():
    german = StudyFactory(slug="schlaf", title="Schlaf und Schichtarbeit", language="de")
    english = StudyFactory(slug="sleep", title="Sleep and shift work")
    client = Client()

    # The consent page, and its form error when the box is not ticked.
    token = invitation_create_bulk(study=german, count=1)[0].token
    join = client.get(reverse("annotation:join", args=[token]))
    html = join.content.decode()
    assert '<html lang="de">' in html and join["Content-Language"] == "de"
    assert "Willkommen" in html and "So funktioniert es" in html
    assert "Ich habe die obigen Informationen gelesen und bin mit der Teilnahme einverstanden." in html
    refused = client.post(reverse("annotation:join", args=[token]), {})
    assert refused.status_code == 400
    assert "Bitte bestätigen Sie, dass Sie mit der Teilnahme einverstanden sind." in refused.content.decode()

    # The persona form: labels, expertise levels, Django's own "required" and the service's own errors.
    client.post(reverse("annotation:join", args=[token]), {"consent": "on"})
    empty = client.post(reverse("annotation:profile", args=["schlaf"]), {"expertise": "novice"})
    html = empty.content.decode()
    assert empty.status_code == 400
    assert "Ihre Rolle" in html and "Fortgeschritten: etwas Vorwissen" in html
    assert "Dieses Feld ist zwingend erforderlich." in html
    assert "This field is required." not in html

    # The question page, the waiting page's status poll (a JSON message), a notice and a 404 page.
    client.post(reverse("annotation:profile", args=["schlaf"]), PERSONA)
    ask = client.get(reverse("annotation:ask", args=["schlaf"])).content.decode()
    assert "Frage 1 von 8" in ask and "Suchen und zusammenfassen" in ask
    too_long = client.post(reverse("annotation:ask", args=["schlaf"]), {"text": "x" * 1001, "client_token": "t1"})
    assert "Bitte halten Sie Ihre Frage unter 1000 Zeichen (sie hat 1001)." in too_long.content.decode()
    missing = client.get(reverse("annotation:wait", args=["schlaf", 7]))
    assert missing.status_code == 404
    assert '<html lang="de">' in missing.content.decode() and "Seite nicht gefunden" in missing.content.decode()

    Study.objects.filter(pk=german.pk).update(status=Study.Status.PAUSED)
    paused = client.get(reverse("annotation:ask", args=["schlaf"]))
    assert paused.status_code == 403
    assert "<h1>Diese Studie ist pausiert</h1>" in paused.content.decode()
    assert "Bitte kommen Sie später wieder" in paused.content.decode()

    # Same thread, next requests: an English study's page and the start page are English.
    other = _joined(english)
    page = other.get(reverse("annotation:profile", args=["sleep"])).content.decode()
    assert '<html lang="en">' in page and "Your role" in page and "Ihre Rolle" not in page
    assert '<html lang="en">' in client.get(reverse("annotation:home")).content.decode()


def test_the_waiting_page_status_poll_is_in_the_studys_language(django_capture_on_commit_callbacks):
    study = StudyFactory(slug="warten", language="de")
    client = _joined(study)
    client.post(reverse("annotation:profile", args=["warten"]), PERSONA)
    with django_capture_on_commit_callbacks():  # retrieval is held back: the question is still being searched
        client.post(reverse("annotation:ask", args=["warten"]), {"text": "Schlaf im Nachtdienst?", "client_token": "a"})
    wait = client.get(reverse("annotation:wait", args=["warten", 1])).content.decode()
    assert "Ihre Zusammenfassungen werden geschrieben" in wait
    assert 'data-ready-message="{done} von {total} Zusammenfassungen fertig.' in wait
    status = client.get(reverse("annotation:status", args=["warten", 1])).json()
    assert status["message"] == "Relevante Abstracts von Fachartikeln werden gesucht…"

    # The note stored with a question whose sources match nothing is English in the data, German on the page.
    Query.objects.filter(participation__study=study).update(retrieval_note=NO_MATCH_NOTE)
    wait = client.get(reverse("annotation:wait", args=["warten", 1])).content.decode()
    assert "Wir haben keine Quellen gefunden, die genau zu Ihrer Frage passen" in wait
