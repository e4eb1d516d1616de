"""The file-mode CLI: tables in, report and tables out, clear errors on bad input."""

from __future__ import annotations

import io
import json

import pytest

from analysis.cli import main
from analysis.exports import export_comparisons, read_comparisons
from analysis.stats import table_checksum
from analysis.stats.synthetic import SyntheticStudy, simulate_comparisons
from tests.analysis.helpers import REPO_ROOT
from tests.analysis.legacy_fixture import make_legacy_zip


def test_cli_writes_report_and_tables(tmp_path):
    frame = simulate_comparisons(SyntheticStudy(n_annotators=10, queries_per_annotator=5, n_metrics=2, seed=4))
    export_comparisons(frame, tmp_path / "in", formats=("parquet",))
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps({"metric_families": {"metric_00": "lexical"}, "metric_thresholds": {"metric_01": 0.2}})
    )
    out = tmp_path / "out"
    stdout = io.StringIO()
    status = main(
        [
            "--comparisons",
            str(tmp_path / "in" / "comparisons.parquet"),
            "--out",
            str(out),
            "--seed",
            "3",
            "--resamples",
            "100",
            "--config",
            str(config),
        ],
        stdout=stdout,
    )
    assert status == 0, stdout.getvalue()
    report = json.loads((out / "report.json").read_text())
    assert report["provenance"]["seed"] == 3 and report["provenance"]["n_resamples"] == 100
    assert report["config"]["metric_thresholds"] == {"metric_01": 0.2}
    assert (out / "report.html").read_text().startswith("<!DOCTYPE html>")
    for name in ("win_rates", "neither_rates", "regression", "agreement", "bradley_terry", "annotators", "page_times"):
        assert (out / "tables" / f"{name}.csv").exists(), name
    # The input already is the table: not written again unless asked (its checksum is in the provenance).
    assert not list(out.glob("comparisons.*"))
    assert report["provenance"]["table_sha256"] == table_checksum(
        read_comparisons(tmp_path / "in" / "comparisons.parquet")
    )
    assert "analysed" in stdout.getvalue()
    again = tmp_path / "again"
    argv = ["--comparisons", str(tmp_path / "in" / "comparisons.parquet"), "--out", str(again), "--resamples", "20"]
    assert main([*argv, "--export"], stdout=io.StringIO()) == 0
    manifest = json.loads((again / "comparisons.manifest.json").read_text())
    assert manifest["table_sha256"] == report["provenance"]["table_sha256"]
    assert {f["format"] for f in manifest["files"]} == {"csv", "jsonl", "parquet"}


def test_cli_reads_a_legacy_export(tmp_path):
    make_legacy_zip(tmp_path / "paper.zip", n_annotators=6, seed=1)
    status = main(
        [
            "--comparisons",
            str(tmp_path / "paper.zip"),
            "--out",
            str(tmp_path / "o"),
            "--resamples",
            "50",
            "--no-export",
        ],
        stdout=io.StringIO(),
    )
    assert status == 0
    assert json.loads((tmp_path / "o" / "report.json").read_text())["provenance"]["studies"] == ["paper"]


def test_cli_errors_are_messages_not_tracebacks(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("annotator,choice\na,left\n")
    stderr = io.StringIO()
    assert main(["--comparisons", str(bad), "--out", str(tmp_path / "o")], stderr=stderr) == 2
    assert "missing required columns" in stderr.getvalue()
    stderr = io.StringIO()
    assert main(["--comparisons", str(tmp_path / "none.csv"), "--out", str(tmp_path / "o")], stderr=stderr) == 2
    assert "error:" in stderr.getvalue()
    stderr = io.StringIO()
    assert main(["--comparisons", str(bad), "--out", str(tmp_path / "o"), "--resamples", "0"], stderr=stderr) == 2


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        # A direction given as text would be truthy: "false" read as higher-is-better.
        ({"higher_is_better": {"hallucination": "false"}}, "higher_is_better['hallucination'] must be true or false"),
        ({"use_metric_registry": "no"}, "use_metric_registry must be true or false, not 'no'"),
        ({"threshold_sweep_points": "11"}, "threshold_sweep_points must be a whole number, not '11'"),
        ({"small_sample_below": 12.5}, "small_sample_below must be a whole number, not 12.5"),
        # A NaN threshold never compares, so the metric would never vote "neither".
        ({"metric_thresholds": {"rouge1": float("nan")}}, "metric_thresholds['rouge1'] must be a number, not nan"),
        ({"default_metric_threshold": "0.1"}, "default_metric_threshold must be a number or null"),
        ({"metric_families": ["lexical"]}, "metric_families must be an object mapping names to text"),
        ({"bradley_terry_pseudo_wins": -1}, "bradley_terry_pseudo_wins must be non-negative"),
    ],
)
def test_config_settings_of_the_wrong_type_are_messages(settings, message, tmp_path):
    frame = simulate_comparisons(SyntheticStudy(n_annotators=4, queries_per_annotator=2, seed=2))
    frame.to_csv(tmp_path / "t.csv", index=False)
    config = tmp_path / "settings.json"
    config.write_text(json.dumps(settings))
    stderr = io.StringIO()
    args = ["--comparisons", str(tmp_path / "t.csv"), "--out", str(tmp_path / "o"), "--config", str(config)]
    assert main(args, stdout=io.StringIO(), stderr=stderr) == 2
    assert message in stderr.getvalue() and "Traceback" not in stderr.getvalue()
    assert not (tmp_path / "o" / "report.json").exists()


def _bad_table(tmp_path, spoil):
    """A clean simulated table written as CSV after `spoil(frame)` changed it; the path."""
    frame = simulate_comparisons(SyntheticStudy(n_annotators=4, queries_per_annotator=3, seed=5))
    frame = spoil(frame.copy())
    path = tmp_path / "table.csv"
    frame.to_csv(path, index=False)
    return path


def _refusal(tmp_path, path, *extra):
    out, stdout, stderr = tmp_path / "out", io.StringIO(), io.StringIO()
    status = main(
        ["--comparisons", str(path), "--out", str(out), "--resamples", "20", *extra], stdout=stdout, stderr=stderr
    )
    assert "analysed" not in stdout.getvalue()
    assert not (out / "report.json").exists()
    return status, stderr.getvalue()


def test_a_condition_outside_the_analysis_vocabulary_is_refused_by_row(tmp_path):
    def capital(frame):
        frame.loc[frame["left_condition"] == "persona", "left_condition"] = "Persona"
        return frame

    path = _bad_table(tmp_path, capital)
    status, message = _refusal(tmp_path, path)
    assert status == 2
    first = int(read_comparisons(path)["left_condition"].eq("Persona").to_numpy().argmax()) + 1
    assert f"row {first} (annotator " in message
    assert "left_condition 'Persona' is not a condition of this analysis (expected persona or generic" in message
    assert "more problems" in message  # every such row counts, the first five are named
    # Named as the analysis's own conditions, the same rows are accepted.
    config = tmp_path / "settings.json"
    config.write_text(json.dumps({"persona_condition": "Persona"}))
    both = _bad_table(tmp_path, lambda f: capital(f).replace({"right_condition": {"persona": "Persona"}}))
    assert (
        main(["--comparisons", str(both), "--out", str(tmp_path / "ok"), "--resamples", "20", "--config", str(config)])
        == 0
    )


def test_duplicated_match_rows_are_refused(tmp_path):
    import pandas as pd

    path = _bad_table(tmp_path, lambda f: pd.concat([f, f.iloc[[0, 5]]], ignore_index=True))
    status, message = _refusal(tmp_path, path)
    rows = len(read_comparisons(path))
    assert status == 2
    assert "2 problems in the comparison table" in message
    assert (
        f"row {rows - 1} (annotator " in message
        and "the same match as row 1 (same annotator, query_id, match)" in message
    )
    assert f"row {rows} (" in message and "the same match as row 6 " in message


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("right_system", "LEFT", "left_system and right_system are the same"),
        ("choice", "leftt", "choice 'leftt' is not left, right, neither or tie"),
        ("stage", "semifinal", "stage 'semifinal' is not round1, round2, ..., final or adaptive"),
        ("winner_side", "right", "winner_side 'right' disagrees with choice 'left'"),
        ("winner_system", "other-persona", "winner_system 'other-persona' is not the chosen side's system"),
        ("left_model", None, "left_model is empty"),
        ("seconds_on_page", -3.0, "seconds_on_page -3.0 is negative"),
    ],
)
def test_an_impossible_row_is_refused_by_row_and_field(tmp_path, column, value, message):
    spoilt = []

    def spoil(frame):
        frame = frame.reset_index(drop=True)
        spoilt.append(int(frame.index[frame["choice"].eq("left")][2]))
        frame.loc[spoilt[0], column] = frame.loc[spoilt[0], "left_system"] if value == "LEFT" else value
        return frame

    path = _bad_table(tmp_path, spoil)
    status, printed = _refusal(tmp_path, path)
    row = spoilt[0] + 1  # the data rows' numbering: 1 is the first after the header
    assert status == 2
    # The row is named with the problem (a wrong choice also makes its winner columns disagree with it).
    assert printed.startswith(f"error: {path}: ") and "problem" in printed
    assert f"row {row} (annotator " in printed and message in printed


def test_manage_py_analyze_refuses_the_same_table_with_status_2(tmp_path):
    import subprocess
    import sys

    path = _bad_table(tmp_path, lambda f: f.replace({"left_condition": {"persona": "Persona"}}))
    done = subprocess.run(  # noqa: S603 - our own manage.py with arguments built here
        [sys.executable, "manage.py", "analyze", "--comparisons", str(path), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 2, done.stderr
    assert "left_condition 'Persona' is not a condition of this analysis" in done.stderr
    assert not (tmp_path / "o" / "report.json").exists()
