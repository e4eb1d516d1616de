"""Bad input to the analysis commands is a one-line error naming the problem (exit 2 / CommandError),
never a traceback, and nothing is half-written."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from analysis.cli import main
from analysis.stats import AnalysisConfig
from analysis.stats.synthetic import SyntheticStudy, simulate_comparisons
from tests.annotation.factories import StudyFactory


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "t.csv"
    simulate_comparisons(SyntheticStudy(n_annotators=4, queries_per_annotator=2, seed=2)).to_csv(path, index=False)
    return path


def _run(args):
    stderr = io.StringIO()
    code = main(args, stdout=io.StringIO(), stderr=stderr)
    return code, stderr.getvalue()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2]", "settings.json: must be a JSON object of AnalysisConfig settings"),
        ('"seed"', "settings.json: must be a JSON object of AnalysisConfig settings"),
        ("{seed: 1}", "settings.json: not valid JSON"),
        ('{"sede": 1}', "settings.json: unknown analysis settings: sede"),
        ('{"seed": "1"}', "settings.json: seed must be a whole number"),
    ],
)
def test_a_bad_settings_file_is_an_error_naming_the_settings_file(table, tmp_path, content, message):
    config = tmp_path / "settings.json"
    config.write_text(content)
    code, err = _run(["--comparisons", str(table), "--out", str(tmp_path / "o"), "--config", str(config)])
    assert code == 2
    assert message in err and "Traceback" not in err
    assert "t.csv" not in err  # the table is fine; the message must not blame it
    assert not (tmp_path / "o").exists()


def test_a_negative_seed_is_refused_naming_seed(table, tmp_path):
    code, err = _run(["--comparisons", str(table), "--out", str(tmp_path / "o"), "--seed", "-1"])
    assert code == 2
    assert "seed must be a non-negative whole number, not -1" in err
    assert not (tmp_path / "o").exists()
    with pytest.raises(ValueError, match="seed must be a non-negative whole number"):
        AnalysisConfig(seed=-5)


def test_an_out_path_that_is_a_file_is_refused_and_left_alone(table, tmp_path):
    taken = tmp_path / "rows.jsonl"
    taken.write_text("kept\n")
    code, err = _run(["--comparisons", str(table), "--out", str(taken), "--resamples", "20"])
    assert code == 2
    assert f"error: --out: {taken} exists and is not a folder" in err and "Traceback" not in err
    assert taken.read_text() == "kept\n"


def test_analyze_file_mode_refuses_an_out_file_and_a_non_object_config(table, tmp_path, capsys):
    taken = tmp_path / "rows.jsonl"
    taken.write_text("kept\n")
    with pytest.raises(CommandError, match=f"--out: {taken} exists and is not a folder"):
        call_command("analyze", "--comparisons", str(table), "--out", str(taken))
    config = tmp_path / "list.json"
    config.write_text("[1, 2]")
    with pytest.raises(CommandError):
        call_command("analyze", "--comparisons", str(table), "--out", str(tmp_path / "o"), "--config", str(config))
    assert "list.json: must be a JSON object" in capsys.readouterr().err
    assert taken.read_text() == "kept\n"


@pytest.mark.django_db
def test_analyze_study_mode_refuses_an_out_file_and_a_negative_seed(played_study, tmp_path):
    taken = tmp_path / "rows.jsonl"
    taken.write_text("kept\n")
    with pytest.raises(CommandError, match=f"--out: {taken} exists and is not a folder"):
        call_command("analyze", "--study", played_study.slug, "--out", str(taken), "--resamples", "20")
    assert taken.read_text() == "kept\n"
    with pytest.raises(CommandError, match="seed must be a non-negative whole number, not -1"):
        call_command("analyze", "--study", played_study.slug, "--out", str(tmp_path / "o"), "--seed", "-1")
    assert not (tmp_path / "o").exists()


@pytest.mark.django_db
def test_export_refuses_an_out_file(tmp_path):
    study = StudyFactory(slug="exp")
    taken = tmp_path / "rows.jsonl"
    taken.write_text("kept\n")
    with pytest.raises(CommandError, match=f"--out: {taken} exists and is not a folder"):
        call_command("export_comparisons", "--study", study.slug, "--out", str(taken))
    assert taken.read_text() == "kept\n"


@pytest.mark.django_db
@pytest.mark.parametrize("formats", [",", "", " , "])
def test_export_refuses_an_empty_format_list(tmp_path, formats):
    study = StudyFactory(slug="exp")
    with pytest.raises(CommandError, match="--formats: give at least one of csv, jsonl, parquet"):
        call_command("export_comparisons", "--study", study.slug, "--out", str(tmp_path / "o"), "--formats", formats)
    assert not (tmp_path / "o").exists()
