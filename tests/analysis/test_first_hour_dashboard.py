"""The research dashboard as a newcomer meets it: stress tests that cannot run here are offered as such and
refused in the page's words; the median time per page is not rounded to "0 s"."""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest

from analysis.models import ResearchJob
from annotation.models import Judgment

pytestmark = pytest.mark.django_db

# The rewrite tests of seed 002 section 3.1 and seed 003: a language model writes their perturbations.
REWRITE_TESTS = {"lengthen", "shorten", "audience", "paraphrased", "simplified", "negated", "summarised"}
RUNNABLE_TESTS = {"distractor", "incremental", "added_source_text", "long_document"}


def _dashboard(client, study) -> str:
    return client.get(f"/research/studies/{study.slug}/").content.decode()


def _options(html: str) -> dict[str, bool]:
    """Each stress test option: enabled or not."""
    select = re.search(r'<select id="tests".*?</select>', html, re.S).group(0)
    return {m.group(1): "disabled" not in m.group(2) for m in re.finditer(r'<option value="([^"]+)"([^>]*)>', select)}


def test_the_stress_form_offers_only_what_can_run_and_says_why_not(played_study, researcher_client):
    html = _dashboard(researcher_client, played_study)
    options = _options(html)
    assert all(options[name] for name in RUNNABLE_TESTS)
    assert not any(options[name] for name in REWRITE_TESTS)
    assert "need a model server to rewrite the summaries" in unescape(html)


def test_a_rewrite_test_is_refused_in_the_pages_words(played_study, researcher_client):
    response = researcher_client.post(
        f"/research/studies/{played_study.slug}/jobs/",
        {"kind": "stress", "tests": ["distractor", "paraphrased"], "metrics": ["rouge1"], "limit": "10"},
    )
    assert response.status_code == 302
    error = parse_qs(urlsplit(response["Location"]).query)["error"][0]
    assert "paraphrased" in error and "language model" in error
    assert "Error" not in error and "--" not in error, "no exception class or command-line flag"
    assert not ResearchJob.objects.filter(kind="stress").exists(), "nothing was queued"
    page = researcher_client.get(response["Location"]).content.decode()
    assert "paraphrased" in unescape(page) and 'role="alert"' in page


@pytest.mark.parametrize(("seconds", "shown"), [([0.3, 0.4, 0.5], "0.4 s"), ([12.2, 14.0, 30.0], "14 s")])
def test_the_median_time_per_page_keeps_sub_second_times(played_study, researcher_client, seconds, shown):
    judgments = list(Judgment.objects.filter(match__bracket__query__participation__study=played_study))
    for i, judgment in enumerate(judgments):
        judgment.seconds_on_page = seconds[i % 3]
    Judgment.objects.bulk_update(judgments, ["seconds_on_page"])
    if len(judgments) % 3:  # keep the three values equally often, so the median is the middle one
        Judgment.objects.filter(pk__in=[j.pk for j in judgments[len(judgments) - len(judgments) % 3 :]]).update(
            seconds_on_page=None
        )
    html = _dashboard(researcher_client, played_study)
    assert re.search(r"<dt>Median time per page</dt><dd>([^<]*)</dd>", html).group(1) == shown


def test_the_report_page_links_back_to_the_study_dashboard(
    played_study, researcher_client, settings, tmp_path, django_capture_on_commit_callbacks
):
    settings.MEDIA_ROOT = str(tmp_path)
    with django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(
            f"/research/studies/{played_study.slug}/jobs/", {"kind": "report", "n_resamples": "50", "seed": "1"}
        )
    assert response.status_code == 302
    job = ResearchJob.objects.get(kind="report")
    assert job.status == "done", job.error
    shown = researcher_client.get(f"/research/studies/{played_study.slug}/report/", follow=True)
    html = b"".join(shown.streaming_content).decode()
    assert f'href="/research/studies/{played_study.slug}/"' in html and "Back to Played study" in html
    assert "<svg" in html or "Win rate" in html or "win rate" in html
    download = researcher_client.get(f"/research/jobs/{job.pk}/files/report.html?download=1")
    assert b"Back to" not in b"".join(download.streaming_content), "the downloaded file is the report as written"


def test_the_api_refuses_a_rewrite_test_as_the_page_does(played_study, researcher_client):
    """A stress job runs without a rewriter model, whether started from the page, the API or plain Python."""
    refused = researcher_client.post(
        f"/api/v1/research/studies/{played_study.slug}/jobs/",
        {"kind": "stress", "options": {"tests": ["distractor", "negated"], "metrics": ["rouge1"], "limit": 10}},
        content_type="application/json",
    )
    assert refused.status_code == 400
    message = refused.json()["extra"]["fields"]["tests"][0]
    assert "negated" in message and "language model" in message
    assert not ResearchJob.objects.filter(kind="stress").exists(), "nothing was queued"


def test_a_researchers_preview_is_in_none_of_the_dashboards_counts(
    researcher_client, django_capture_on_commit_callbacks
):
    """The dashboard says "A preview never reaches the analysis, the exports or the counts above": a study whose
    only answers are a researcher's preview and a colleague's preview screened out by the screening question shows no summaries, no one screened out and no participant in its quality table
    (before: 4 summaries generated, 1 screened out, and the previews' codes listed as participants)."""
    from django.contrib.auth import get_user_model

    from annotation.models import Participation
    from annotation.selectors.tournament import match_current
    from annotation.services.participation import participation_preview_start, participation_screen
    from annotation.services.persona import persona_save
    from annotation.services.query import query_submit
    from annotation.services.tournament import judgment_record
    from tests.annotation.factories import PERSONA, StudyFactory

    study = StudyFactory(
        slug="preview-counts", screening_question="Do you work shifts?", screening_choices=["Yes", "No"],
        screening_accepted=["Yes"],
    )  # fmt: skip
    user = get_user_model().objects.get(username="researcher")
    colleague = get_user_model().objects.create_user("colleague")
    for member in (user, colleague):
        study.memberships.create(user=member, role="researcher")
    screened = participation_preview_start(study=study, by=colleague)
    participation_screen(participation=screened, answer="No")
    preview = participation_preview_start(study=study, by=user)
    participation_screen(participation=preview, answer="Yes")
    persona_save(participation=preview, data=PERSONA)
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(participation=preview, text="Shift work and sleep in nurses", client_token="")
    while (match := match_current(query=query)) is not None:
        judgment_record(match=match, choice="left", by=preview)
    assert Participation.objects.filter(study=study, source="preview", screened_out_at__isnull=False).count() == 1
    assert query.candidates.filter(status="done").count() == 4

    html = _dashboard(researcher_client, study)
    stats = re.sub(r"\s+", " ", unescape(re.search(r'<dl class="stats">.*?</dl>', html, re.S).group(0)))
    assert "<dt>Summaries generated</dt><dd>0</dd>" in stats
    assert "<dt>Participants</dt><dd>0 (0 finished)</dd>" in stats  # no "screened out"
    assert preview.code not in html and screened.code not in html and "No participants yet." in html
