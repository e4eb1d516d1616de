"""What an analysis writes: the same files from the web and the command line, per-system tables as in
seed 000, alpha intervals when the agreement carries them, and exports that include texts only on request."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from django.core.management import call_command

from analysis import services
from analysis.exports import TEXT_COLUMNS, read_comparisons
from analysis.models import ResearchJob
from analysis.report import render_html
from analysis.stats import AnalysisConfig, analyze
from analysis.stats.synthetic import SyntheticStudy, simulate_comparisons
from analysis.stats.systems import system_tables
from annotation.models import Candidate, Query
from kernel.exceptions import ApplicationError
from scoring.services import scoring_run_start
from tests.analysis.helpers import row, table


def _files(root) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


@pytest.mark.django_db
def test_the_web_report_writes_the_tables_the_command_line_writes(
    played_study, django_capture_on_commit_callbacks, tmp_path
):
    with django_capture_on_commit_callbacks(execute=True):
        scoring_run_start(study=played_study, metrics=["rouge1", "ra_2", "sa_2", "ar_2", "ar_risk"])
        job = services.research_job_start(study=played_study, kind="report", options={"n_resamples": 100, "seed": 3})
    job.refresh_from_db()
    assert job.status == ResearchJob.Status.DONE, job.error
    call_command("analyze", "--study", played_study.slug, "--out", str(tmp_path), "--resamples", "100", "--seed", "3")
    web, cli = set(job.files), _files(tmp_path)
    assert web == cli
    assert {"tables/win_rates.csv", "tables/system_metrics.csv", "tables/system_risk_bands.csv"} <= web
    bands = pd.read_csv(services.job_dir(job) / "tables" / "system_risk_bands.csv")
    # Every one of the 24 summaries (3 annotators x 2 questions x 4 systems) is in exactly one band.
    assert bands[["extractive", "balanced", "moderate", "high"]].to_numpy().sum() == bands["scored"].sum() == 24
    html = (services.job_dir(job) / "report.html").read_text()
    assert "Abstractiveness: RA, SA, AR" in html and "Hallucination risk bands" in html


def test_system_tables_count_each_summary_once():
    # Two systems; summary c1 wins round 1 and plays the final again: it must count once.
    rows = [
        row("a", "left", left=("m1", "persona"), right=("m2", "generic"), stage="round1"),
        row("a", "right", left=("m2", "generic"), right=("m1", "persona"), stage="final", bracket_pair="final"),
        row("b", "left", left=("m1", "persona"), right=("m2", "generic"), stage="round1"),
    ]
    frame = table(rows)
    frame["left_candidate"] = ["c1", "c3", "c4"]
    frame["right_candidate"] = ["c2", "c1", "c5"]
    scores = {"c1": (10.0, 0.5, 0), "c2": (2.0, 2.5, 3), "c3": (4.0, 1.0, 1), "c4": (6.0, 1.5, 2), "c5": (0.0, 0.1, 0)}
    for side in ("left", "right"):
        for k, name in enumerate(("ra_2", "ar_2", "ar_risk")):
            frame[f"{side}__{name}"] = [scores[c][k] for c in frame[f"{side}_candidate"]]
    tables = system_tables(frame)
    assert tables is not None and tables.abstractiveness == ("ra_2", "ar_2")
    by = {r.system: r for r in tables.rows}
    m1, m2 = by["m1/persona"], by["m2/generic"]
    # m1/persona: c1, c4 -> RA (10 + 6) / 2; m2/generic: c2, c3, c5 -> RA (2 + 4 + 0) / 3.
    assert (m1.n_candidates, m1.means["ra_2"]) == (2, 8.0)
    assert (m2.n_candidates, m2.means["ra_2"]) == (3, 2.0)
    risk = {r.system: r.counts for r in tables.risk}
    assert risk["m1/persona"] == {"extractive": 1, "balanced": 0, "moderate": 1, "high": 0}
    assert risk["m2/generic"] == {"extractive": 1, "balanced": 1, "moderate": 0, "high": 1}
    assert tables.all_zero == ()


def test_a_metric_zero_for_every_summary_is_flagged():
    frame = table([row("a", "left"), row("b", "right")])
    frame["left_candidate"], frame["right_candidate"] = ["c1", "c3"], ["c2", "c4"]
    frame["left__rouge1"] = frame["right__rouge1"] = 0.0
    tables = system_tables(frame)
    assert tables is not None and tables.all_zero == ("rouge1",)
    html = render_html(analyze(frame, config=AnalysisConfig(n_resamples=20)), systems=tables)
    assert "rouge1 is 0 for every summary" in html


def test_alpha_intervals_are_shown_beside_each_alpha():
    frame = simulate_comparisons(SyntheticStudy(n_annotators=8, queries_per_annotator=4, n_metrics=2, seed=3))
    report = analyze(frame, config=AnalysisConfig(n_resamples=50))
    assert report.agreement is not None
    html = render_html(report)
    for m in report.agreement.metrics:
        assert m.ci_low <= m.alpha <= m.ci_high
        assert f"[{m.ci_low:.3f}, {m.ci_high:.3f}]" in html


@pytest.mark.django_db
def test_exports_include_texts_only_when_asked(played_study, tmp_path, django_capture_on_commit_callbacks):
    call_command("export_comparisons", "--study", played_study.slug, "--out", str(tmp_path / "plain"))
    plain = read_comparisons(tmp_path / "plain" / "comparisons.csv")
    assert not set(TEXT_COLUMNS) & set(plain.columns)
    assert json.loads((tmp_path / "plain" / "comparisons.manifest.json").read_text())["includes_texts"] is False

    call_command("export_comparisons", "--study", played_study.slug, "--out", str(tmp_path / "t"), "--include-texts")
    manifest = json.loads((tmp_path / "t" / "comparisons.manifest.json").read_text())
    assert manifest["includes_texts"] is True
    for fmt in ("csv", "jsonl", "parquet"):
        frame = read_comparisons(tmp_path / "t" / f"comparisons.{fmt}")
        assert set(TEXT_COLUMNS) <= set(frame.columns)
        first = frame.iloc[0]
        query = Query.objects.get(pk=int(first["query_id"]))
        assert first["query_text"] == query.text
        assert json.loads(first["persona"]) == query.persona.as_dict()
        assert json.loads(first["source_titles"]) == [d.title for d in query.documents.order_by("rank")]
        assert first["left_summary"] == Candidate.objects.get(pk=int(first["left_candidate"])).text
        assert first["right_summary"] == Candidate.objects.get(pk=int(first["right_candidate"])).text

    with django_capture_on_commit_callbacks(execute=True):
        job = services.research_job_start(
            study=played_study, kind="export", options={"format": "parquet", "include_texts": True}
        )
    job.refresh_from_db()
    assert job.status == ResearchJob.Status.DONE, job.error
    assert job.manifest["includes_texts"] is True and set(TEXT_COLUMNS) <= set(job.manifest["columns"])
    with pytest.raises(ApplicationError) as error:
        services.research_job_start(study=played_study, kind="export", options={"include_texts": "yes"})
    assert error.value.field == "include_texts"


@pytest.mark.django_db
def test_the_export_form_asks_for_texts_explicitly(played_study, researcher_client, django_capture_on_commit_callbacks):
    page = researcher_client.get(f"/research/studies/{played_study.slug}/").content.decode()
    assert 'name="include_texts"' in page and "checked" not in page.split('name="include_texts"')[1][:20]
    with django_capture_on_commit_callbacks(execute=True):
        researcher_client.post(
            f"/research/studies/{played_study.slug}/jobs/", {"kind": "export", "format": "csv", "include_texts": "1"}
        )
        researcher_client.post(f"/research/studies/{played_study.slug}/jobs/", {"kind": "export", "format": "csv"})
    with_texts, without = ResearchJob.objects.order_by("pk")
    assert with_texts.options["include_texts"] is True and without.options["include_texts"] is False
    assert with_texts.manifest["includes_texts"] is True and without.manifest["includes_texts"] is False
