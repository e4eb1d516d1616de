"""No text a researcher sends is ever run as code (issue 28; docs/permissions.md, "Nothing a user writes is
evaluated").

The attack that worked: a report job whose settings carried a regression formula, which patsy evaluated as
Python in the worker (`I(__import__('os').system(...))`). Each request below carries a snippet that would
create a marker file if anything evaluated it; each is refused naming the field, and the marker never appears.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from analysis.cli import main as analysis_cli
from analysis.exports import export_comparisons
from analysis.models import ResearchJob
from analysis.stats.synthetic import SyntheticStudy, simulate_comparisons
from scoring.models import ScoringRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "ran-as-code"


def code(marker: Path) -> str:
    return f"__import__('os').system('touch {marker}')"


def report_configs(snippet: str) -> list[dict[str, object]]:
    """The snippet in every text-valued analysis setting, one setting at a time."""
    return [
        {"regression_formula": f"personalized_won ~ I({snippet})"},
        {"regression_formula": f'personalized_won ~ Q("x" if {snippet} else "y")'},
        {"regression_predictors": [f"I({snippet})"]},
        {"regression_predictors": ["model_personalized", snippet]},
        {"persona_condition": snippet},
        {"generic_condition": snippet},
        {"inference": snippet},
        {"reference_levels": {"model_personalized": snippet}},
        {"reference_levels": {snippet: "x"}},
        {"metric_families": {"rouge1": snippet}},
        {"metric_thresholds": {snippet: 0.1}},
        {"higher_is_better": {snippet: True}},
    ]


def test_report_settings_carrying_code_are_a_400_naming_config_and_run_nothing(
    played_study, researcher_client, marker, django_capture_on_commit_callbacks
):
    for config in report_configs(code(marker)):
        with django_capture_on_commit_callbacks(execute=True):
            response = researcher_client.post(
                f"/api/v1/research/studies/{played_study.slug}/jobs/",
                {"kind": "report", "options": {"n_resamples": 20, "config": config}},
                content_type="application/json",
            )
        assert response.status_code == 400, (config, response.content)
        body = response.json()
        assert "config" in body["extra"]["fields"], body
        setting = next(iter(config))
        assert setting in body["message"] or setting in json.dumps(body["extra"]), (setting, body)
    assert not ResearchJob.objects.exists()
    assert not marker.exists()


def test_export_stress_and_scoring_options_carrying_code_are_refused_by_name(
    played_study, researcher_client, marker, django_capture_on_commit_callbacks
):
    snippet = code(marker)
    jobs = f"/api/v1/research/studies/{played_study.slug}/jobs/"
    requests = [
        (jobs, {"kind": "export", "options": {"format": snippet}}, "format"),
        (jobs, {"kind": "export", "options": {"table": snippet}}, "table"),
        (jobs, {"kind": "export", "options": {"exclude": snippet}}, "exclude"),
        (jobs, {"kind": "stress", "options": {"tests": [snippet], "metrics": ["rouge1"]}}, "tests"),
        (jobs, {"kind": "stress", "options": {"tests": ["distractor"], "metrics": [snippet]}}, "metrics"),
        (f"/api/v1/research/studies/{played_study.slug}/scoring-runs/", {"metrics": [snippet]}, "metrics"),
    ]
    for url, body, field in requests:
        with django_capture_on_commit_callbacks(execute=True):
            response = researcher_client.post(url, body, content_type="application/json")
        assert response.status_code == 400, (body, response.content)
        assert field in json.dumps(response.json()), (field, response.json())
    assert not ResearchJob.objects.exists() and not ScoringRun.objects.exists()
    assert not marker.exists()


def test_the_command_lines_refuse_such_settings_naming_the_option(tmp_path, marker):
    frame = simulate_comparisons(SyntheticStudy(n_annotators=6, queries_per_annotator=4, n_metrics=1, seed=3))
    export_comparisons(frame, tmp_path / "in", formats=("csv",))
    table = str(tmp_path / "in" / "comparisons.csv")
    for config in report_configs(code(marker)):
        path = tmp_path / "settings.json"
        path.write_text(json.dumps(config))
        stderr = io.StringIO()
        status = analysis_cli(
            ["--comparisons", table, "--out", str(tmp_path / "out"), "--resamples", "20", "--config", str(path)],
            stdout=io.StringIO(),
            stderr=stderr,
        )
        assert status == 2, config
        assert str(path) in stderr.getvalue() and next(iter(config)) in stderr.getvalue(), stderr.getvalue()
        with pytest.raises(CommandError):
            call_command(
                "analyze", "--comparisons", table, "--out", str(tmp_path / "out2"), "--config", str(path),
                stdout=io.StringIO(), stderr=io.StringIO(),
            )  # fmt: skip
    assert not marker.exists()


def test_a_name_that_looks_like_mathtext_is_drawn_as_written():
    """A model named `sys$\\frac$` failed the report's plots with a mathtext parse error."""
    from analysis.report.plots import interval_plot

    svg = interval_plot([("sys$\\frac$ (final)", 0.5, 0.4, 0.6)], title="$x^2$ wins")
    assert "sys$\\frac$ (final)" in svg and "$x^2$ wins" in svg
