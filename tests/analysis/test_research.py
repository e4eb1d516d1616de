"""Researchers: comparison table, scoring in the background, exports, the report, permissions, commands."""

from __future__ import annotations

import csv
import io
import json
import logging
import re
import time
import zipfile

import pandas as pd
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from analysis import services
from analysis.models import ResearchJob
from analysis.selectors import comparison_rows
from analysis.tasks import run_research_job
from annotation.models import Candidate, Judgment, Match
from kernel.exceptions import ApplicationError
from scoring.models import CandidateScore, ScoringRun
from scoring.services import scoring_run_start
from studies.models import Study
from tests.annotation.factories import join

pytestmark = pytest.mark.django_db


def test_comparison_table_has_one_row_per_answered_match(played_study):
    rows = comparison_rows(study=played_study)
    assert len(rows) == Judgment.objects.count()
    skipped = Match.objects.filter(status="skipped").count()
    assert len(rows) == 3 * 2 * 3 - skipped
    row = rows[0]
    assert row["stage"] in ("round1", "final") and row["bracket_pair"] in ("AB", "CD", "final")
    assert {row["left_condition"], row["right_condition"]} <= {"persona", "generic"}
    for r in rows:
        if r["choice"] == "neither":
            assert r["winner_system"] is None
        else:
            assert r["winner_system"] == r[f"{r['choice']}_system"]
    assert all(r["seconds_on_page"] >= 0 for r in rows)


def test_scoring_run_stores_scores_and_joins_them(played_study, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run = scoring_run_start(study=played_study, metrics=["rouge1", "ar_2", "bleu"])
    run.refresh_from_db()
    assert run.status == ScoringRun.Status.DONE and run.done == run.total == 3 * 2 * 4
    assert CandidateScore.objects.filter(metric="rouge1", value__isnull=False).count() == run.total
    rows = comparison_rows(study=played_study)
    assert all(isinstance(r["left__rouge1"], float) and isinstance(r["right__ar_2"], float) for r in rows)


def test_unknown_metric_is_a_field_error(played_study):
    with pytest.raises(ApplicationError) as error:
        scoring_run_start(study=played_study, metrics=["rouge1", "nonsense_metric"])
    assert error.value.field == "metrics" and "nonsense_metric" in error.value.message
    assert not ScoringRun.objects.exists()


def test_report_job_writes_json_html_and_table(played_study, django_capture_on_commit_callbacks, researcher_client):
    with django_capture_on_commit_callbacks(execute=True):
        scoring_run_start(study=played_study, metrics=["rouge1", "chrf"])
        job = services.research_job_start(study=played_study, kind="report", options={"n_resamples": 200, "seed": 3})
    job.refresh_from_db()
    assert job.status == ResearchJob.Status.DONE, job.error
    assert {"report.json", "report.html", "comparisons.csv"} <= set(job.files)
    report = json.loads((services.job_dir(job) / "report.json").read_text())
    assert report["provenance"]["n_rows"] == Judgment.objects.count()
    assert report["provenance"]["seed"] == 3
    html = researcher_client.get(f"/research/studies/{played_study.slug}/report/", follow=True)
    assert html.status_code == 200 and b"<svg" in b"".join(html.streaming_content)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_export_job_in_each_format(played_study, django_capture_on_commit_callbacks, researcher_client, fmt):
    with django_capture_on_commit_callbacks(execute=True):
        job = services.research_job_start(study=played_study, kind="export", options={"format": fmt})
    job.refresh_from_db()
    assert job.status == ResearchJob.Status.DONE, job.error
    assert f"comparisons.{fmt}" in job.files and "comparisons.manifest.json" in job.files
    assert job.manifest["rows"] == Judgment.objects.count()
    response = researcher_client.get(f"/research/jobs/{job.pk}/files/comparisons.{fmt}")
    assert response.status_code == 200
    if fmt == "parquet":
        frame = pd.read_parquet(io.BytesIO(b"".join(response.streaming_content)))
        assert len(frame) == Judgment.objects.count()


def test_the_summary_table_is_exported_from_the_dashboard(
    played_study, django_capture_on_commit_callbacks, researcher_client
):
    page = researcher_client.get(f"/research/studies/{played_study.slug}/").content.decode()
    assert "Export the summary table" in page and 'name="table" value="summaries"' in page
    with django_capture_on_commit_callbacks(execute=True):
        posted = researcher_client.post(
            f"/research/studies/{played_study.slug}/jobs/", {"kind": "export", "table": "summaries", "format": "csv"}
        )
    assert posted.status_code == 302 and "error" not in posted["Location"]
    job = ResearchJob.objects.get()
    assert job.status == ResearchJob.Status.DONE, job.error
    assert job.options["table"] == "summaries" and "summaries.csv" in job.files
    response = researcher_client.get(f"/research/jobs/{job.pk}/files/summaries.csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    # One row per summary of the study, each a candidate the comparisons show or could have shown.
    assert len(rows) == Candidate.objects.filter(query__participation__study=played_study).count()
    listed = researcher_client.get(f"/research/studies/{played_study.slug}/").content.decode()
    assert "(summary table, csv)" in listed


def test_the_dashboard_counts_the_summaries_cut_off_at_max_tokens(played_study, researcher_client):
    url = f"/research/studies/{played_study.slug}/"
    assert " cut off at max_tokens</span>" not in researcher_client.get(url).content.decode()
    # Two summaries a model stopped at max_tokens (its reply's finish_reason), accepted as done.
    cut = Candidate.objects.filter(query__participation__study=played_study, status="done").order_by("pk")[:2]
    Candidate.objects.filter(pk__in=[c.pk for c in cut]).update(finish_reason="length")
    assert ">2 cut off at max_tokens</span>" in researcher_client.get(url).content.decode()


def test_bad_job_options_are_refused_on_the_page(played_study, researcher_client):
    response = researcher_client.post(
        f"/research/studies/{played_study.slug}/jobs/", {"kind": "export", "format": "xlsx"}
    )
    assert response.status_code == 302 and "Export+format" in response["Location"]
    # A table the page does not offer (a hand-made post): refused by name, and no job starts.
    response = researcher_client.post(
        f"/research/studies/{played_study.slug}/jobs/", {"kind": "export", "format": "csv", "table": "everything"}
    )
    assert response.status_code == 302 and "table+must+be+one+of" in response["Location"]
    assert not ResearchJob.objects.exists()


STRESS = {"tests": ["distractor"], "metrics": ["rouge1"]}


@pytest.mark.parametrize(
    ("kind", "options", "field"),
    [
        ("stress", {**STRESS, "tests": [1]}, "tests"),  # a 500 before (joining the unknown names)
        ("stress", {**STRESS, "tests": [["distractor"]]}, "tests"),  # a 500 before (unhashable)
        ("stress", {**STRESS, "metrics": ["rouge9"]}, "metrics"),
        ("stress", {**STRESS, "metrics": "rouge1"}, "metrics"),  # read letter by letter: "unknown metric 'r'"
        ("stress", {**STRESS, "metrics": [3]}, "metrics"),
        ("stress", {**STRESS, "limit": -3}, "limit"),  # "Negative indexing is not supported."
        ("stress", {**STRESS, "limit": "ten"}, "limit"),
        ("stress", {**STRESS, "limit": True}, "limit"),
        ("report", {"n_resamples": True}, "n_resamples"),  # a JSON true is no count
        ("report", {"seed": -1}, "seed"),
        ("report", {"seed": False}, "seed"),
        ("report", {"config": {"seed": 3}}, "config"),  # "got multiple values for keyword argument 'seed'"
        ("report", {"config": {"n_resamples": 10}}, "config"),
        ("export", {"seed": True}, "seed"),
    ],
)
def test_research_job_options_the_job_could_not_run_with_are_a_400_naming_the_field(
    played_study, researcher_client, kind, options, field
):
    """What the job would fail on in the worker (or the server on the spot) is refused when the job is asked
    for: 400 with a field message, no job queued. Before, each was a 201 and a job failed with a Python error
    ("TypeError: '<' not supported between instances of 'str' and 'int'"), or a 500 for the first two."""
    response = researcher_client.post(
        f"/api/v1/research/studies/{played_study.slug}/jobs/",
        {"kind": kind, "options": options},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert field in response.json()["extra"]["fields"], response.json()
    assert not ResearchJob.objects.exists()


def test_a_report_job_with_an_unknown_setting_is_refused_naming_it(played_study):
    with pytest.raises(ApplicationError) as error:
        services.research_job_start(study=played_study, kind="report", options={"config": {"infrence": "x"}})
    # Before: "TypeError: AnalysisConfig.__init__() got an unexpected keyword argument 'infrence'".
    assert error.value.field == "config" and "unknown analysis settings: infrence" in str(error.value)
    assert not ResearchJob.objects.exists()


def test_a_stored_report_job_whose_settings_no_longer_hold_fails_naming_them(played_study):
    """A job queued by an earlier release with a setting since withdrawn (the free regression formula) fails in
    the worker with the setting's name; nothing of it runs."""
    job = ResearchJob.objects.create(
        study=played_study,
        kind="report",
        options={"seed": 1, "n_resamples": 20, "config": {"regression_formula": "personalized_won ~ 1"}},
    )
    run_research_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.status == ResearchJob.Status.FAILED
    assert "regression_formula is no longer accepted" in job.error
    assert "report.json" not in (job.files or [])


def test_annotators_never_see_statistics(played_study, client):
    join(played_study, user=None)
    participation = played_study.participations.first()
    annotator = Client()
    annotator.force_login(participation.annotator)
    refused = annotator.get(f"/research/studies/{played_study.slug}/")
    assert refused.status_code == 403 and "not a researcher account" in refused.content.decode()
    assert "Sign out" not in refused.content.decode()  # an annotator has no password to sign in again with
    assert Client().get(f"/research/studies/{played_study.slug}/")["Location"].startswith("/accounts/login/")
    assert annotator.get(f"/api/v1/research/studies/{played_study.slug}/comparisons/").status_code == 403
    assert client.get(f"/api/v1/research/studies/{played_study.slug}/comparisons/").status_code in (401, 403)


def test_dashboard_and_research_api(played_study, researcher_client, django_capture_on_commit_callbacks):
    page = researcher_client.get(f"/research/studies/{played_study.slug}/").content.decode()
    assert "Comparisons" in page and "Compute report" in page
    rows = researcher_client.get(f"/api/v1/research/studies/{played_study.slug}/comparisons/").json()["rows"]
    assert len(rows) == Judgment.objects.count()
    with django_capture_on_commit_callbacks(execute=True):
        created = researcher_client.post(
            f"/api/v1/research/studies/{played_study.slug}/jobs/",
            {"kind": "stress", "options": {"tests": ["distractor", "incremental"], "metrics": ["rouge1"], "limit": 12}},
            content_type="application/json",
        )
    assert created.status_code == 201
    job = researcher_client.get(f"/api/v1/research/jobs/{created.json()['id']}/").json()
    assert job["status"] == "done", job["error"]
    assert any(name.endswith(".html") for name in job["files"])
    bad = researcher_client.post(
        f"/api/v1/research/studies/{played_study.slug}/jobs/",
        {"kind": "stress", "options": {"tests": ["nope"], "metrics": ["rouge1"]}},
        content_type="application/json",
    )
    assert bad.status_code == 400 and "tests" in bad.json()["extra"]["fields"]


def test_analyze_command_study_and_file_modes(played_study, tmp_path):
    call_command("analyze", "--study", played_study.slug, "--out", str(tmp_path / "db"), "--resamples", "100")
    report = json.loads((tmp_path / "db" / "report.json").read_text())
    assert report["provenance"]["n_rows"] == Judgment.objects.count()
    call_command(
        "analyze",
        "--comparisons",
        str(tmp_path / "db" / "comparisons.csv"),
        "--out",
        str(tmp_path / "file"),
        "--resamples",
        "100",
    )
    again = json.loads((tmp_path / "file" / "report.json").read_text())
    assert again["provenance"]["n_rows"] == report["provenance"]["n_rows"]
    # One default seed for every way in: the same table gives the same intervals from the study and the file.
    assert again["config"]["seed"] == report["config"]["seed"]
    assert again["win_rates"] == report["win_rates"] and again["bradley_terry"] == report["bradley_terry"]
    # The file's report names its input, though the table is not written again (no --export).
    assert again["provenance"]["source"] == "comparisons.csv" and report["provenance"]["source"] == ""
    assert again["provenance"]["table_sha256"] == report["provenance"]["table_sha256"]
    assert not (tmp_path / "file" / "comparisons.manifest.json").exists()
    with pytest.raises(CommandError, match="No study"):
        call_command("analyze", "--study", "missing", "--out", str(tmp_path / "x"))


def _legacy_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(
            "users.json",
            json.dumps(
                [
                    {
                        "id": "ann-1",
                        "pre_task_answers": {"role": "nurse", "expertise": "expert", "research_area": "sleep"},
                    },
                    {"id": "ann-2", "pre_task_answers": {"role": "student", "expertise": "novice"}},
                ]
            ),
        )
        for annotator, picks in (("ann-1", [("A", "C", "A"), ("N", "D", None)]), ("ann-2", [("B", "D", "D")])):
            annotations = []
            for index, (ab, cd, final) in enumerate(picks):
                annotations.append(
                    {
                        "query_index": index,
                        "query": f"question {index} of {annotator}",
                        "summaries": {k: f"summary {k} [1]" for k in "ABCD"},
                        "metadata": {
                            "A": {"model": "deepseek", "has_pre_question": True},
                            "B": {"model": "llama", "has_pre_question": False},
                            "C": {"model": "llama", "has_pre_question": True},
                            "D": {"model": "deepseek", "has_pre_question": False},
                        },
                        "paper_ids": ["W1", "W2"],
                        "round1_ab": ab,
                        "round1_cd": cd,
                        "final": final if final else "N",
                        "feedback": "",
                    }
                )
            archive.writestr(f"results/annotator-{annotator}.json", json.dumps(annotations))
    return buffer.getvalue()


def test_import_legacy_export_then_analyse(tmp_path):
    path = tmp_path / "export.zip"
    path.write_bytes(_legacy_zip())
    call_command("import_legacy_export", str(path), "--study", "legacy")
    study = Study.objects.get(slug="legacy")
    rows = comparison_rows(study=study)
    # ann-1: 3 + 2 (neither skips the final); ann-2: 3.
    assert len(rows) == 8
    finals = [r for r in rows if r["match"] == "final"]
    assert {r["winner_model"] for r in finals} == {"deepseek"}
    call_command("import_legacy_export", str(path), "--study", "legacy")  # idempotent
    assert len(comparison_rows(study=study)) == 8
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"not a zip")
    with pytest.raises(CommandError):
        call_command("import_legacy_export", str(bad), "--study", "legacy")


def test_a_finished_scoring_run_is_not_polled(played_study, researcher_client):
    """The page reloads when a polled job ends, so polling a finished run reloaded it for ever."""
    from scoring.models import ScoringRun

    done = ScoringRun.objects.create(study=played_study, metrics=["rouge1"], status="done")
    running = ScoringRun.objects.create(study=played_study, metrics=["chrf"], status="running")
    page = researcher_client.get(f"/research/studies/{played_study.slug}/").content.decode()
    assert f"/research/scoring/{running.pk}/status/" in page
    assert f"/research/scoring/{done.pk}/status/" not in page


def test_report_job_settings_are_checked(played_study, django_capture_on_commit_callbacks):
    # Not an object: refused when the job is asked for, nothing queued.
    with pytest.raises(ApplicationError) as error:
        services.research_job_start(study=played_study, kind="report", options={"config": ["inference", "standard"]})
    assert error.value.field == "config" and not ResearchJob.objects.exists()
    # A setting of the wrong type: refused by name when the job is asked for, nothing queued.
    with pytest.raises(ApplicationError) as error:
        services.research_job_start(
            study=played_study, kind="report", options={"n_resamples": 20, "config": {"higher_is_better": {"x": "no"}}}
        )
    assert error.value.field == "config" and not ResearchJob.objects.exists()
    assert "higher_is_better['x'] must be true or false, not 'no'" in str(error.value)
    # A good one is applied: the report records it.
    with django_capture_on_commit_callbacks(execute=True):
        job = services.research_job_start(
            study=played_study, kind="report", options={"n_resamples": 20, "config": {"inference": "standard"}}
        )
    job.refresh_from_db()
    assert job.status == ResearchJob.Status.DONE, job.error
    report = json.loads((services.job_dir(job) / "report.json").read_text())
    assert report["config"]["inference"] == "standard" and report["win_rates"]["method"] == "cluster-bootstrap"


def test_a_research_job_makes_way_for_annotator_work_on_its_host_within_its_bound(
    played_study, django_capture_on_commit_callbacks, settings, caplog
):
    """An annotator task in flight on this host (its mark in Redis, as the annotator worker sets it) holds a
    research job up at its stages, for RESEARCH_YIELD_MAX_PAUSE_S at most: then the job finishes regardless."""
    from kernel import yielding
    from tests.integration.worker import broker_url

    caplog.set_level(logging.INFO, logger="analysis.services")
    settings.RESEARCH_YIELDS_TO_ANNOTATORS = True
    settings.RESEARCH_YIELD_URL = broker_url()
    settings.RESEARCH_YIELD_HOST = f"test-{played_study.pk}-{time.monotonic_ns()}"
    settings.RESEARCH_YIELD_MAX_PAUSE_S = 0.6
    yielding.annotator_work_began("a-generation-that-never-ends")
    try:
        started = time.monotonic()
        with django_capture_on_commit_callbacks(execute=True):
            job = services.research_job_start(study=played_study, kind="export", options={"format": "csv"})
        elapsed = time.monotonic() - started
    finally:
        yielding.annotator_work_ended("a-generation-that-never-ends")
    job.refresh_from_db()
    assert job.status == ResearchJob.Status.DONE, job.error
    paused = re.findall(r"research job \d+ paused (\d+) times, ([\d.]+) s in all", caplog.text)
    # Paused once, for its whole budget (the work in flight never ended), and then went on: the bound is the
    # pause's own account, not a race against the clock.
    assert paused == [("1", paused[0][1])] and float(paused[0][1]) >= 0.55 and elapsed >= 0.6
    # Nothing in flight any more: the next job does not pause.
    caplog.clear()
    with django_capture_on_commit_callbacks(execute=True):
        services.research_job_start(study=played_study, kind="export", options={"format": "csv"})
    assert "paused" not in caplog.text


def test_a_stress_job_leaves_a_researchers_preview_out(researcher_client, django_capture_on_commit_callbacks):
    """A preview is not data: the stress job reads no preview summary (a study with nothing else has no summaries
    to test), as the scoring runs, so a preview restarted while it runs cannot change what it measured."""
    from django.contrib.auth import get_user_model

    from annotation.services.participation import participation_preview_start
    from annotation.services.persona import persona_save
    from annotation.services.query import query_submit
    from studies.models import StudyMembership
    from tests.analysis.conftest import QUESTIONS
    from tests.annotation.factories import PERSONA, StudyFactory

    user = get_user_model().objects.get(username="researcher")
    study = StudyFactory(slug="previewed", title="Previewed only")
    StudyMembership.objects.create(study=study, user=user, role="researcher")
    preview = participation_preview_start(study=study, by=user)
    persona_save(participation=preview, data=PERSONA)
    with django_capture_on_commit_callbacks(execute=True):
        query_submit(participation=preview, text=QUESTIONS[0], client_token="")
    assert preview.queries.get().candidates.filter(status="done").count() == 4
    with django_capture_on_commit_callbacks(execute=True):
        created = researcher_client.post(
            f"/api/v1/research/studies/{study.slug}/jobs/",
            {"kind": "stress", "options": {"tests": ["distractor"], "metrics": ["rouge1"], "limit": 10}},
            content_type="application/json",
        )
    assert created.status_code == 201, created.content
    job = researcher_client.get(f"/api/v1/research/jobs/{created.json()['id']}/").json()
    assert job["status"] == "failed" and "no generated summaries yet" in job["error"], job


def _token_client(client: Client) -> Client:
    """The researcher's API client: the same user, with an API token (as a script calls the API)."""
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    user = client.get("/research/").wsgi_request.user
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return api


def test_the_same_job_asked_for_again_while_it_waits_is_that_job(researcher_client, played_study):
    """A double click, a form sent again or a script's retry after a timeout costs one run: while the first is
    queued (no worker has taken it here: its message is sent only after the test's transaction) the same
    request answers 200 with it; other options, or the same once it has finished, make a new job."""
    api = _token_client(researcher_client)
    url = f"/api/v1/research/studies/{played_study.slug}/jobs/"
    export = {"kind": "export", "options": {"format": "csv"}}
    first = api.post(url, export, format="json")
    again = api.post(url, export, format="json")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    # The research page's button, pressed twice, adds none either.
    researcher_client.post(f"/research/studies/{played_study.slug}/jobs/", {"kind": "export", "format": "csv"})
    assert list(ResearchJob.objects.filter(study=played_study).values_list("pk", flat=True)) == [first.json()["id"]]
    other = api.post(url, {"kind": "export", "options": {"format": "jsonl"}}, format="json")
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]
    ResearchJob.objects.filter(pk=first.json()["id"]).update(status=ResearchJob.Status.DONE)
    rerun = api.post(url, export, format="json")
    assert rerun.status_code == 201 and rerun.json()["id"] not in (first.json()["id"], other.json()["id"])


@pytest.mark.django_db(transaction=True)
def test_two_requests_for_the_same_job_at_the_same_moment_make_one(researcher_client, played_study, monkeypatch):
    """A script's retry racing its first request (two threads through the API, each its own connection): the
    study's row is locked while one looks for the same job, so the other finds it. Without the lock both saw
    none and two jobs ran. The job is left queued (no eager run), as a busy worker would leave it."""
    from config.celery import app
    from tests.support.races import at_once

    monkeypatch.setitem(app.conf, "task_always_eager", False)
    api = _token_client(researcher_client)
    url = f"/api/v1/research/studies/{played_study.slug}/jobs/"
    for round_number in range(5):
        body = {"kind": "report", "options": {"n_resamples": 100 + round_number}}

        def ask(body: dict = body) -> object:
            return api.post(url, body, format="json")

        answers = at_once(ask, ask)
        statuses = sorted(getattr(a, "status_code", a) for a in answers)
        assert statuses == [200, 201], (round_number, statuses)
        assert len({a.json()["id"] for a in answers}) == 1  # type: ignore[union-attr]
        (job,) = ResearchJob.objects.filter(options__n_resamples=100 + round_number)
        assert job.status == ResearchJob.Status.QUEUED, round_number


def test_a_job_no_worker_takes_says_why_it_waits_and_can_be_cancelled(researcher_client, played_study):
    """Nothing serves the research queue: the job waits (its message is sent only after the test's transaction,
    and no worker runs here). The dashboard says why after a while and offers Cancel; cancelled, the job has
    ended with who cancelled it, and a worker that takes its message later changes nothing."""
    from datetime import timedelta

    from django.utils import timezone

    dashboard = f"/research/studies/{played_study.slug}/"
    researcher_client.post(f"/research/studies/{played_study.slug}/jobs/", {"kind": "export", "format": "csv"})
    job = ResearchJob.objects.get(study=played_study)
    page = researcher_client.get(dashboard).content.decode()
    assert "No worker has taken it" not in page  # a minute is how long a busy worker may take
    assert f'action="/research/jobs/{job.pk}/cancel/"' in page
    ResearchJob.objects.filter(pk=job.pk).update(queued_at=timezone.now() - timedelta(minutes=5))
    page = researcher_client.get(dashboard).content.decode()
    assert "No worker has taken it since" in page and "a worker must serve the research queue" in page
    assert researcher_client.post(f"/research/jobs/{job.pk}/cancel/").status_code == 302
    job.refresh_from_db()
    assert (job.status, job.error) == (ResearchJob.Status.FAILED, "Cancelled by researcher.")
    page = researcher_client.get(dashboard).content.decode()
    assert "Cancelled by researcher." in page and f'action="/research/jobs/{job.pk}/cancel/"' not in page
    # The message arrives at last: the worker finds the job ended and writes nothing.
    services.research_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.error, job.files) == (ResearchJob.Status.FAILED, "Cancelled by researcher.", [])
    # The API: a running job is cancelled the same way; again, or once ended, it is answered unchanged.
    api = _token_client(researcher_client)
    running = services.research_job_start(study=played_study, kind="export", options={"format": "jsonl"})
    ResearchJob.objects.filter(pk=running.pk).update(status=ResearchJob.Status.RUNNING, attempts=1)
    first = api.post(f"/api/v1/research/jobs/{running.pk}/cancel/")
    assert first.status_code == 200 and first.json()["status"] == "failed"
    assert api.post(f"/api/v1/research/jobs/{running.pk}/cancel/").json() == first.json()
    # Its worker, still running, neither renews nor finishes it, nor writes its own failure over the cancel.
    services.research_job_lease_renew(job_id=running.pk, attempt=1)
    services.research_job_mark_failed(job_id=running.pk, reason="MemoryError: the run it was cancelled in")
    running.refresh_from_db()
    assert running.status == ResearchJob.Status.FAILED and running.lease_expires_at is None
    assert running.error == "Cancelled by researcher."
