import csv
import json
import re

import pytest

from scoring.stress import StressError, Verdict, run_stress
from scoring.stress.cli import main
from tests.scoring.stress.support import ROWS, TinyMetrics


def test_deterministic_suite_with_a_tiny_metric(tmp_path):
    backend = TinyMetrics()
    report = run_stress(
        ROWS,
        ["deterministic"],
        ["overlap_f1", "length", "constant", "flaky"],
        seed=0,
        out_dir=tmp_path,
        backend=backend,
    )
    assert report.tests == ("distractor", "incremental", "added_source_text")
    f1 = report.result("overlap_f1", "distractor")
    assert f1.rho == -1.0 and f1.monotonicity == 1.0 and f1.passed
    assert report.result("overlap_f1", "incremental").passed
    # length grows with distractors: wrong direction
    assert report.result("length", "distractor").rho == 1.0
    assert report.result("length", "distractor").verdict is Verdict.FAIL
    # a constant metric has no rho: undefined, which fails
    const = report.result("constant", "distractor")
    assert const.rho_verdict is Verdict.UNDEFINED and not const.passed
    # a metric that cannot score the empty level: the error is recorded, the rest still counts
    flaky = report.result("flaky", "incremental")
    assert flaky.n_scored[0] == 0 and flaky.extra["errors"] == {"empty summary": len(ROWS)}
    assert report.grid()["overlap_f1"]["distractor"] == "pass"
    # originals are scored once per metric, not once per test
    # originals are scored once per metric family, not once per test; a family is one call
    baseline = [t for t in report.timings if t.stage == "baseline" and t.group == "tiny"]
    assert baseline[0].n_texts == len(ROWS) and baseline[0].metrics == ("overlap_f1", "length")
    dist = [t for t in report.timings if t.stage == "distractor" and t.group == "tiny"]
    assert dist[0].n_texts == 5 * len(ROWS)
    assert (len(ROWS), ("overlap_f1", "length")) in backend.calls


def test_report_files(tmp_path):
    report = run_stress(ROWS, ["distractor", "incremental"], ["overlap_f1", "constant"], seed=1,
                        out_dir=tmp_path, backend=TinyMetrics())  # fmt: skip
    assert set(report.files) == {"html", "json", "results_csv", "scores_csv"}
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["seed"] == 1 and data["provenance"]["rows_sha256"]
    assert data["grid"] == {
        "overlap_f1": {"distractor": "pass", "incremental": "pass"},
        "constant": {"distractor": "undefined", "incremental": "undefined"},
    }
    with open(tmp_path / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4 and rows[0]["metric"] == "overlap_f1" and rows[0]["verdict"] == "pass"
    with open(tmp_path / "scores.csv") as fh:
        scores = list(csv.DictReader(fh))
    assert len(scores) == 2 * len(ROWS) * (6 + 3)
    page = (tmp_path / "report.html").read_text()
    assert "<svg" in page and "#b7e1b5" in page and "#d6d6d6" in page
    # standalone: no external scripts, stylesheets or images
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)


def test_progress_callback_sees_every_scoring_step():
    seen = []
    run_stress(ROWS, ["distractor"], ["overlap_f1", "length"], seed=0, backend=TinyMetrics(),
               progress=lambda stage, done, total: seen.append((stage, done, total)))  # fmt: skip
    assert seen[-1] == ("scoring", 2, 2)  # one family, two stages (baseline, distractor)


@pytest.mark.parametrize(
    ("tests", "metrics", "message"),
    [
        (["nope"], ["length"], "unknown test 'nope'"),
        (["distractor"], ["bleurt"], "unknown metric 'bleurt'"),
        (["lengthen"], ["length"], "need a rewriter model"),
    ],
)
def test_run_stress_names_the_problem(tests, metrics, message):
    with pytest.raises(StressError, match=message):
        run_stress(ROWS, tests, metrics, seed=0, backend=TinyMetrics())


def _write_rows(path):
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


def test_cli_runs_and_writes_the_report(tmp_path, capsys):
    rows = _write_rows(tmp_path / "rows.jsonl")
    out = tmp_path / "out"
    code = main(["--input", str(rows), "--tests", "distractor,incremental", "--metrics", "overlap_f1",
                 "--out", str(out)], backend=TinyMetrics())  # fmt: skip
    assert code == 0
    assert (out / "report.html").is_file() and (out / "results.csv").is_file()
    printed = capsys.readouterr().out
    assert "overlap_f1" in printed and "pass" in printed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tests", "distractr", "--metrics", "length"], "unknown test 'distractr'"),
        (["--tests", "distractor", "--metrics", "rouge9"], "unknown metric 'rouge9'"),
        (["--tests", "shorten", "--metrics", "length"], "need a rewriter model"),
        (["--tests", "shorten", "--metrics", "length", "--llm-model", "m"], "give both --llm-base-url"),
    ],
)
def test_cli_errors(tmp_path, capsys, args, message):
    rows = _write_rows(tmp_path / "rows.jsonl")
    code = main(["--input", str(rows), "--out", str(tmp_path / "o"), *args], backend=TinyMetrics())
    assert code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "8MB", "-1"])
def test_cli_refuses_a_response_cap_that_is_not_a_number_of_bytes(tmp_path, capsys, monkeypatch, value):
    # The rewriter's model server is read under MODEL_SERVER_MAX_RESPONSE_BYTES, as the platform's are.
    monkeypatch.setenv("MODEL_SERVER_MAX_RESPONSE_BYTES", value)
    rows = _write_rows(tmp_path / "rows.jsonl")
    args = ["--tests", "shorten", "--metrics", "length", "--llm-model", "m", "--llm-base-url", "http://127.0.0.1:9/v1"]
    assert main(["--input", str(rows), "--out", str(tmp_path / "o"), *args], backend=TinyMetrics()) == 2
    assert f"MODEL_SERVER_MAX_RESPONSE_BYTES must be a whole number of bytes, at least 1, not '{value}'" in (
        capsys.readouterr().err
    )


def test_cli_missing_and_malformed_input(tmp_path, capsys):
    base = ["--tests", "distractor", "--metrics", "length", "--out", str(tmp_path / "o")]
    assert main(["--input", str(tmp_path / "absent.jsonl"), *base], backend=TinyMetrics()) == 2
    assert "absent.jsonl does not exist" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "summary": "x"}\n{not json}\n')
    assert main(["--input", str(bad), *base], backend=TinyMetrics()) == 2
    assert "bad.jsonl:2: not valid JSON" in capsys.readouterr().err


def test_cli_reads_names_with_spaces_and_a_trailing_comma(tmp_path, capsys):
    rows = _write_rows(tmp_path / "rows.jsonl")
    out = tmp_path / "out"
    code = main(["--input", str(rows), "--tests", "distractor, incremental,", "--metrics", " overlap_f1 , length,",
                 "--out", str(out)], backend=TinyMetrics())  # fmt: skip
    assert code == 0, capsys.readouterr().err
    with open(out / "results.csv") as fh:
        ran = {(r["metric"], r["test"]) for r in csv.DictReader(fh)}
    assert ran == {(m, t) for m in ("overlap_f1", "length") for t in ("distractor", "incremental")}


@pytest.mark.parametrize(
    ("args", "option", "problem", "known"),
    [
        (["--tests", ",", "--metrics", "length"], "--tests ','", "no stress test given", "distractor, incremental"),
        (["--tests", " ", "--metrics", "length"], "--tests ' '", "no stress test given", "meaning-preserving"),
        (["--tests", "distractor", "--metrics", ", ,"], "--metrics ', ,'", "no metric given", "overlap_f1, length"),
        (["--tests", "distractor, nope", "--metrics", "length"], "--tests", "unknown test 'nope'", "deterministic"),
        (["--tests", "distractor", "--metrics", "length, bleu"], "--metrics", "unknown metric 'bleu'", "constant"),
    ],
)
def test_cli_names_the_option_that_holds_no_or_a_wrong_name(tmp_path, capsys, args, option, problem, known):
    # The input does not exist: a wrong name is refused before the input is read, and nothing is written.
    out = tmp_path / "o"
    code = main(["--input", str(tmp_path / "absent.jsonl"), "--out", str(out), *args], backend=TinyMetrics())
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {option}") and problem in err and known in err
    assert "Traceback" not in err and "absent.jsonl" not in err
    assert not out.exists()
