"""The exclusion rule: applied before every statistic, stated in the report and the export manifest with the
counts it left out per reason (docs/analysis.md, "Exclusion rule")."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from analysis.selectors import exclusion_default, exclusion_reasons
from analysis.stats import AnalysisConfig, analyze
from analysis.stats.errors import AnalysisError
from analysis.stats.exclusion import AnnotatorFlags, ExclusionRule, apply_exclusion
from annotation.services.quality import participation_exclude
from kernel.exceptions import ApplicationError
from tests.analysis.helpers import row, table
from tests.annotation.factories import StudyFactory, ask_and_answer, join

STRONG_PERSONA = ("variant", "strong / persona", "round1")


def _hand_table():
    # strong/persona (left) against weak/generic (right), round 1 only. a1 wins both, a2 one of two, and a3,
    # who clicked through, none of three: 3 wins in 7 matches; without a3, 3 in 4.
    rows = [
        row("a1", "left", query_id="q1"),
        row("a1", "left", query_id="q2"),
        row("a2", "right", query_id="q3"),
        row("a2", "left", query_id="q4"),
        row("a3", "right", query_id="q5", seconds=2.0),
        row("a3", "right", query_id="q6", seconds=2.0),
        row("a3", "neither", query_id="q7", seconds=2.0),
    ]
    return table(rows)


CONFIG = AnalysisConfig(n_resamples=50, seed=7)


def test_excluding_a_flagged_annotator_changes_the_win_rate_to_the_hand_computed_value():
    frame = _hand_table()
    flags = {"a1": AnnotatorFlags(), "a2": AnnotatorFlags(manual=True), "a3": AnnotatorFlags(speed=True)}
    everyone = analyze(frame, config=CONFIG).win_rates.get(*STRONG_PERSONA)
    assert (everyone.wins, everyone.n, everyone.rate) == (3, 7, pytest.approx(3 / 7))

    kept, summary = apply_exclusion(frame, flags, ExclusionRule(("speed",)))
    report = analyze(kept, config=CONFIG, exclusion=summary)
    cell = report.win_rates.get(*STRONG_PERSONA)
    assert (cell.wins, cell.n, cell.rate) == (3, 4, pytest.approx(3 / 4))
    assert sorted(set(kept["annotator"])) == ["a1", "a2"]
    # Every reason is counted, zero or not; a2's manual flag counts zero under a rule without "manual".
    assert summary.participations == {"checks": 0, "speed": 1, "manual": 0}
    assert summary.comparisons == {"checks": 0, "speed": 3, "manual": 0}
    assert (summary.total_participations, summary.total_comparisons, summary.kept_comparisons) == (1, 3, 4)
    assert report.to_dict()["exclusion"]["rule"] == "speed"
    assert "Left out 1 participations and 3 comparisons" in report.summary()


def test_combined_reasons_count_an_annotator_under_each_but_once_in_total():
    frame = _hand_table()
    flags = {"a2": AnnotatorFlags(manual=True, speed=True), "a3": AnnotatorFlags(speed=True, checks=True)}
    kept, summary = apply_exclusion(frame, flags, ExclusionRule.parse("checks, speed,manual"))
    assert list(kept["annotator"]) == ["a1", "a1"]
    assert summary.rule == "checks,speed,manual"
    assert summary.participations == {"checks": 1, "speed": 2, "manual": 1}
    assert summary.comparisons == {"checks": 3, "speed": 5, "manual": 2}
    assert (summary.total_participations, summary.total_comparisons, summary.kept_comparisons) == (2, 5, 2)
    # "none" keeps everything, and still reports every count (all zero).
    kept, summary = apply_exclusion(frame, flags, ExclusionRule.parse("none"))
    assert len(kept) == 7 and summary.total_comparisons == 0 and set(summary.participations.values()) == {0}
    with pytest.raises(AnalysisError, match="unknown exclusion reason 'fast'"):
        ExclusionRule.parse("checks,fast")


pytestmark_db = pytest.mark.django_db


_ranked = ask_and_answer


@pytestmark_db
def test_the_default_rule_follows_the_study_and_unknown_reasons_are_refused():
    assert exclusion_default(study=StudyFactory()) == ("manual",)
    assert exclusion_default(study=StudyFactory(check_share=0.2, speed_threshold_seconds=5)) == (
        "checks",
        "speed",
        "manual",
    )
    study = StudyFactory()
    assert exclusion_reasons(study=study, exclude="none") == ()
    assert exclusion_reasons(study=study, exclude=["manual", "speed"]) == ("speed", "manual")
    with pytest.raises(ApplicationError) as error:
        exclusion_reasons(study=study, exclude="checks,fast")
    assert error.value.field == "exclude" and "fast" in error.value.message


@pytestmark_db
def test_manage_analyze_states_the_rule_and_its_counts_in_the_report_and_the_manifest(
    tmp_path, django_capture_on_commit_callbacks
):
    study = StudyFactory(slug="excl")
    kept, dropped = join(study), join(study)
    _ranked(kept, django_capture_on_commit_callbacks, "How does night shift work affect nurses' sleep?")
    _ranked(dropped, django_capture_on_commit_callbacks, "Shift work and medication errors in nursing")
    admin = get_user_model().objects.create_user(username="boss", is_superuser=True)
    participation_exclude(participation=dropped, reason="duplicate account", by=admin)

    call_command("analyze", study="excl", out=tmp_path, resamples=20)
    report = json.loads((tmp_path / "report.json").read_text())
    manifest = json.loads((tmp_path / "comparisons.manifest.json").read_text())
    # Each ranked question here is three comparisons (both answers "left": the final is played).
    expected = {
        "rule": "manual",
        "participations": {"checks": 0, "speed": 0, "manual": 1},
        "comparisons": {"checks": 0, "speed": 0, "manual": 3},
        "total_participations": 1,
        "total_comparisons": 3,
        "kept_comparisons": 3,
        "excluded_annotators": [dropped.code],
    }
    assert report["exclusion"] == expected
    assert manifest["exclusion"] == expected
    assert report["provenance"]["n_rows"] == 3 and manifest["rows"] == 3
    assert "Exclusion rule: <code>manual</code>" in (tmp_path / "report.html").read_text()

    with pytest.raises(CommandError, match="Unknown exclusion reason fast"):
        call_command("analyze", study="excl", out=tmp_path / "bad", exclude="fast")

    # The research API's comparison table applies the same rule, and refuses an unknown one with a field message.
    api = Client()
    api.force_login(admin)
    url = "/api/v1/research/studies/excl/comparisons/"
    body = api.get(url).json()
    assert {r["annotator"] for r in body["rows"]} == {kept.code} and body["exclusion"]["total_comparisons"] == 3
    everyone = api.get(url, {"exclude": "none"}).json()
    assert len(everyone["rows"]) == 6 and everyone["exclusion"]["participations"] == {
        "checks": 0,
        "speed": 0,
        "manual": 0,
    }
    refused = api.get(url, {"exclude": "fast"})
    assert refused.status_code == 400 and "fast" in refused.content.decode()


@pytestmark_db
def test_the_research_job_form_and_api_take_the_rule_and_keep_it_with_the_job():
    from django.contrib.auth.models import Group

    from analysis.models import ResearchJob

    StudyFactory(slug="jobs", check_share=0.5)
    researcher = get_user_model().objects.create_user(username="r", is_superuser=True)
    researcher.groups.add(Group.objects.get_or_create(name="researchers")[0])
    client = Client()
    client.force_login(researcher)
    start = "/research/studies/jobs/jobs/"
    client.post(start, {"kind": "report", "n_resamples": "10", "exclusion_form": "1", "exclude": ["speed", "manual"]})
    client.post(start, {"kind": "export", "format": "csv", "exclusion_form": "1"})  # no box ticked: "none"
    client.post(start, {"kind": "export", "format": "csv"})  # no form: the study's default
    assert [j.options["exclude"] for j in ResearchJob.objects.order_by("pk")] == [
        ["speed", "manual"],
        [],
        ["checks", "manual"],
    ]
    refused = client.post(
        "/api/v1/research/studies/jobs/jobs/",
        {"kind": "report", "options": {"exclude": "checks,fast"}},
        content_type="application/json",
    )
    assert refused.status_code == 400 and "fast" in refused.content.decode()
    assert ResearchJob.objects.count() == 3


@pytestmark_db
def test_a_preview_or_a_participation_screened_out_before_annotating_is_never_counted_as_excluded(
    tmp_path, django_capture_on_commit_callbacks
):
    """The report states what the rule left out of the data: a researcher's preview that clicked through (speed
    flag) or that they excluded on the dashboard, and a participation that declined consent and was excluded,
    were never data, so they are not "left out" of it either (before: 2 participations left out, 0 comparisons,
    their codes listed among the excluded annotators)."""
    from django.contrib.auth.models import Group

    from annotation.models import Judgment, Participation
    from annotation.services.participation import participation_preview_start, participation_screen_out
    from annotation.services.persona import persona_save
    from studies.models import StudyMembership
    from tests.annotation.factories import PERSONA

    study = StudyFactory(slug="previewed-excl", speed_threshold_seconds=30)
    annotator = join(study)
    _ranked(annotator, django_capture_on_commit_callbacks, "How does night shift work affect nurses' sleep?")
    Judgment.objects.filter(match__bracket__query__participation=annotator).update(seconds_on_page=60)
    researcher = get_user_model().objects.create_user(username="previewer", is_superuser=True)
    researcher.groups.add(Group.objects.get_or_create(name="researchers")[0])
    StudyMembership.objects.create(study=study, user=researcher, role="researcher")
    preview = participation_preview_start(study=study, by=researcher)
    persona_save(participation=preview, data=PERSONA)
    _ranked(preview, django_capture_on_commit_callbacks, "Shift work and medication errors in nursing")
    Judgment.objects.filter(match__bracket__query__participation=preview).update(seconds_on_page=2)
    declined = join(study, persona=False)
    participation_screen_out(participation=declined, reason=Participation.ScreenOut.DECLINED_CONSENT)
    participation_exclude(participation=declined, reason="declined", by=researcher)
    preview.refresh_from_db()
    participation_exclude(participation=preview, reason="my own preview", by=researcher)

    nothing_left_out = {
        "rule": "speed,manual",
        "participations": {"checks": 0, "speed": 0, "manual": 0},
        "comparisons": {"checks": 0, "speed": 0, "manual": 0},
        "total_participations": 0,
        "total_comparisons": 0,
        "kept_comparisons": 3,
        "excluded_annotators": [],
    }
    call_command("analyze", study=study.slug, out=tmp_path, resamples=20)
    assert json.loads((tmp_path / "report.json").read_text())["exclusion"] == nothing_left_out
    assert json.loads((tmp_path / "comparisons.manifest.json").read_text())["exclusion"] == nothing_left_out
    api = Client()
    api.force_login(researcher)
    body = api.get(f"/api/v1/research/studies/{study.slug}/comparisons/").json()
    assert body["exclusion"] == nothing_left_out and {r["annotator"] for r in body["rows"]} == {annotator.code}
