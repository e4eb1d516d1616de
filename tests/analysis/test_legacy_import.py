"""Importing the paper's export into studies: where it may go, what it keeps (feedback, no placement),
and the enrichment that gives its sources their titles and abstracts back."""

from __future__ import annotations

import json

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from analysis.legacy import parse_legacy_export
from analysis.legacy_import import legacy_enrich, legacy_import
from analysis.selectors import comparison_frame
from analysis.stats import AnalysisConfig, analyze
from annotation.models import Participation, Query, RetrievedDocument
from corpus.models import CorpusDocument
from studies.models import Study, StudySystem
from tests.analysis.legacy_fixture import make_legacy_zip
from tests.annotation.factories import StudyFactory
from tests.support.openalex_standin import make_work, openalex_standin

pytestmark = pytest.mark.django_db


@pytest.fixture
def export_zip(tmp_path):
    path = tmp_path / "paper.zip"
    make_legacy_zip(path, n_annotators=3, queries=4, seed=5)
    return path


def _out(*args: str) -> str:
    import io

    buf = io.StringIO()
    call_command(*args, stdout=buf)
    return buf.getvalue()


def test_one_export_goes_into_two_studies(export_zip):
    first = legacy_import(source=export_zip, study_slug="paper-a")
    second = legacy_import(source=export_zip, study_slug="paper-b")
    assert first.queries_added == second.queries_added > 0
    codes_a = set(Participation.objects.filter(study__slug="paper-a").values_list("code", flat=True))
    codes_b = set(Participation.objects.filter(study__slug="paper-b").values_list("code", flat=True))
    assert len(codes_a) == len(codes_b) == 3 and not codes_a & codes_b
    # Same comparisons in both, annotator codes aside.
    a = comparison_frame(study=Study.objects.get(slug="paper-a"))
    b = comparison_frame(study=Study.objects.get(slug="paper-b"))
    assert sorted(a["winner_system"].dropna()) == sorted(b["winner_system"].dropna())
    again = legacy_import(source=export_zip, study_slug="paper-a")
    assert again.queries_added == 0 and again.queries_skipped == first.queries_added


def test_feedback_is_kept_per_question(export_zip):
    legacy_import(source=export_zip, study_slug="paper")
    export = parse_legacy_export(export_zip)
    expected = {a.query: a.feedback for x in export.annotators for a in x.annotations if a.feedback}
    assert expected, "the fixture has some feedback"
    stored = {q.text: q.feedback for q in Query.objects.filter(participation__study__slug="paper") if q.feedback}
    assert stored == expected


def test_placement_dependent_statistics_say_unavailable(export_zip):
    legacy_import(source=export_zip, study_slug="paper")
    frame = comparison_frame(study=Study.objects.get(slug="paper"))
    assert not frame["placement_recorded"].any()
    report = analyze(frame, config=AnalysisConfig(n_resamples=50))
    position = report.win_rates.select("position")
    assert position and all(r.n == 0 for r in position)
    assert all(a.left_win_rate != a.left_win_rate for a in report.annotators)  # NaN: unknown
    assert any("placement not recorded" in n and "unavailable" in n for n in report.notes)


def test_a_live_study_is_never_an_import_target_by_accident(export_zip):
    study = StudyFactory(slug="live", status=Study.Status.OPEN)
    systems_before = study.systems.count()
    with pytest.raises(CommandError, match=r"paper\.zip: not imported: study 'live' is open.*--into-existing"):
        call_command("import_legacy_export", str(export_zip), "--study", "live")
    assert study.systems.count() == systems_before and not Query.objects.exists()
    out = _out("import_legacy_export", str(export_zip), "--study", "live", "--into-existing")
    assert "new questions will be generated for the imported systems" in out
    assert study.systems.count() == systems_before + 4


def test_a_closed_study_with_its_own_annotators_is_refused(export_zip, played_study):
    Study.objects.filter(pk=played_study.pk).update(status=Study.Status.CLOSED)
    with pytest.raises(CommandError, match="already holds 3 participation"):
        call_command("import_legacy_export", str(export_zip), "--study", played_study.slug)
    assert not StudySystem.objects.filter(study=played_study, generation_backend="openai").exists()


def _works_for(export_zip, *, with_abstract: bool = True) -> list[dict]:
    ids = sorted({p for x in parse_legacy_export(export_zip).annotators for a in x.annotations for p in a.paper_ids})
    return [
        make_work(
            int(work_id[1:]),
            f"Paper {work_id} on sepsis prediction",
            f"We study paper {work_id} and sepsis onset in intensive care." if with_abstract else None,
            year=2021,
            venue="Critical Care",
            authors=["A. Author"],
            is_oa=True,
        )
        for work_id in ids
    ]


def test_enrichment_from_openalex_fills_titles_and_abstracts(export_zip, settings):
    cache.clear()
    out = _out("import_legacy_export", str(export_zip), "--study", "paper")
    assert "have no abstract" in out and "enrich_legacy" in out  # the warning before enrichment
    works = _works_for(export_zip)
    with openalex_standin(works[:-1]) as server:  # one id unknown to OpenAlex
        settings.OPENALEX_BASE_URL = server.base_url
        out = _out("enrich_legacy", "--study", "paper")
        calls = server.calls
        assert all("openalex:" in r["filter"] for r in server.requests)
        # Cached per work: a second run asks OpenAlex only for the one it did not know.
        RetrievedDocument.objects.update(abstract="")
        _out("enrich_legacy", "--study", "paper")
        assert server.calls - calls <= 1
    docs = RetrievedDocument.objects.filter(query__participation__study__slug="paper")
    missing_id = works[-1]["id"].rsplit("/", 1)[-1]
    for doc in docs:
        if doc.external_id == missing_id:
            assert doc.abstract == "" and doc.title == missing_id
        else:
            assert doc.title == f"Paper {doc.external_id} on sepsis prediction"
            assert doc.abstract.startswith(f"We study paper {doc.external_id}")
    n_missing = docs.filter(external_id=missing_id).count()
    assert f"{len(docs) - n_missing} of {len(docs)} sources filled" in out
    assert f"{n_missing} of {len(docs)} sources have no abstract" in out


def test_enrichment_offline_from_the_local_corpus(export_zip):
    legacy_import(source=export_zip, study_slug="paper")
    docs = RetrievedDocument.objects.filter(query__participation__study__slug="paper")
    ids = sorted(set(docs.values_list("external_id", flat=True)))
    CorpusDocument.objects.bulk_create(
        CorpusDocument(
            external_id=f"https://openalex.org/{i}" if n % 2 else i, title=f"Corpus {i}", abstract=f"Abstract {i}."
        )
        for n, i in enumerate(ids)
    )
    out = _out("enrich_legacy", "--study", "paper", "--from-corpus")
    assert f"{docs.count()} of {docs.count()} sources filled, 0 not found" in out
    assert "warning" not in out
    assert all(d.title == f"Corpus {d.external_id}" and d.abstract for d in docs)


def test_import_with_enrich_flag_and_a_failing_openalex(export_zip, settings):
    cache.clear()
    with openalex_standin(_works_for(export_zip), script=["500"] * 10) as server:
        settings.OPENALEX_BASE_URL = server.base_url
        settings.OPENALEX_MAX_RETRIES = 0
        with pytest.raises(CommandError, match="imported, but the sources were not enriched: OpenAlex"):
            call_command("import_legacy_export", str(export_zip), "--study", "paper", "--enrich", "openalex")
    assert Query.objects.filter(participation__study__slug="paper").exists()  # the import itself stands
    with openalex_standin(_works_for(export_zip)) as server:
        settings.OPENALEX_BASE_URL = server.base_url
        result = legacy_enrich(study=Study.objects.get(slug="paper"))
    assert result.filled == result.documents and result.warnings == ()


@override_settings(LEGACY_IMPORT_MAX_TOTAL_BYTES=1000)
def test_the_total_cap_is_a_setting(export_zip):
    with pytest.raises(CommandError, match="above the cap of 1000"):
        call_command("import_legacy_export", str(export_zip), "--study", "paper")
    assert json.dumps(list(Study.objects.values_list("slug", flat=True))) == "[]"


def test_the_papers_metric_analysis_reruns_after_enrichment(export_zip, settings, django_capture_on_commit_callbacks):
    """Before: every source titled by its W-id, so ROUGE-1 against the titles is 0 for every candidate and
    the report says so; after enrich_legacy and a new scoring run, ROUGE-1 sees the titles."""
    from analysis.stats.systems import system_tables
    from scoring.services import scoring_run_start

    cache.clear()
    legacy_import(source=export_zip, study_slug="paper")
    study = Study.objects.get(slug="paper")
    with django_capture_on_commit_callbacks(execute=True):
        scoring_run_start(study=study, metrics=["rouge1"])
    before = system_tables(comparison_frame(study=study))
    assert before is not None and before.all_zero == ("rouge1",)
    works = [
        dict(w, display_name="A follow-up study of recent work on sepsis", title="A follow-up study of recent work")
        for w in _works_for(export_zip)
    ]
    with openalex_standin(works) as server:
        settings.OPENALEX_BASE_URL = server.base_url
        legacy_enrich(study=study)
    with django_capture_on_commit_callbacks(execute=True):
        scoring_run_start(study=study, metrics=["rouge1"])
    after = system_tables(comparison_frame(study=study))
    assert after is not None and after.all_zero == ()
    assert all(r.means["rouge1"] > 0.1 for r in after.rows)


def test_one_system_id_from_the_zip_the_command_line_and_the_database(export_zip, tmp_path):
    """The paper's systems have one id whichever way their rows come in: the zip read as a table, the zip
    analysed on the command line, and the zip imported into a study and read from the database."""
    from analysis.cli import main
    from analysis.legacy import legacy_comparison_table

    expected = {
        "deepseek-v3.1-persona",
        "deepseek-v3.1-generic",
        "llama-3.3-70b-instruct-persona",
        "llama-3.3-70b-instruct-generic",
    }
    from_zip = legacy_comparison_table(parse_legacy_export(export_zip))
    legacy_import(source=export_zip, study_slug="paper")
    from_database = comparison_frame(study=Study.objects.get(slug="paper"))
    for frame in (from_zip, from_database):
        assert set(frame["left_system"]) | set(frame["right_system"]) == expected
    # The same winners as often on both paths.
    assert sorted(from_zip["winner_system"].dropna()) == sorted(from_database["winner_system"].dropna())
    assert (
        main(["--comparisons", str(export_zip), "--out", str(tmp_path / "o"), "--resamples", "20", "--no-export"]) == 0
    )
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert {s["system"] for s in report["bradley_terry"]["systems"]} == expected
