"""score_texts / python -m scoring.cli and stress_test refuse an output they cannot write before any scoring,
and (score_texts / scoring.cli) a metric list that names no metric or an input with no rows."""

from __future__ import annotations

import json

import pytest
from django.core.management import get_commands, load_command_class

from scoring.cli import main as score_main
from scoring.stress.cli import main as stress_main
from tests.scoring.stress.support import ROWS, TinyMetrics


def _rows(path):
    path.write_text('{"id": 1, "summary": "a b c", "reference": "a b"}\n', encoding="utf-8")
    return path


def test_an_output_in_a_missing_folder_is_refused_before_scoring(tmp_path, capsys, monkeypatch):
    import scoring.core.api

    def never(*args, **kwargs):
        raise AssertionError("scored although the output cannot be written")

    monkeypatch.setattr(scoring.core.api, "score_rows", never)
    code = score_main(["--input", str(_rows(tmp_path / "rows.jsonl")), "--output", str(tmp_path / "nodir" / "s.jsonl"),
                       "--metrics", "rouge1"])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "error: --output" in err and "nodir" in err and "does not exist" in err
    assert "Traceback" not in err
    assert not (tmp_path / "nodir").exists()


def test_an_output_that_is_a_folder_is_refused(tmp_path, capsys):
    code = score_main(
        ["--input", str(_rows(tmp_path / "rows.jsonl")), "--output", str(tmp_path), "--metrics", "rouge1"]
    )
    assert code == 2
    assert "is a folder" in capsys.readouterr().err


def _score_texts(argv):
    """`manage.py score_texts ...` as the shell runs it: its exit status."""
    command = load_command_class(get_commands()["score_texts"], "score_texts")
    try:
        command.run_from_argv(["manage.py", "score_texts", *argv])
    except SystemExit as exited:
        return exited.code
    return 0


@pytest.fixture
def model_servers_restored():
    from generation import settings as generation_settings
    from modelserver import cache as llm_cache
    from modelserver import limits

    yield  # score_texts applies the deployment's model-server settings; leave none behind for other tests
    generation_settings._configured = False
    limits.configure_limiter(None)
    llm_cache.configure_cache("dir")


@pytest.mark.parametrize("run", [score_main, _score_texts], ids=["scoring.cli", "score_texts"])
@pytest.mark.parametrize("metrics", [",", " , ,"])
def test_a_metric_list_with_no_names_is_refused(tmp_path, capsys, model_servers_restored, run, metrics):
    out = tmp_path / "scores.jsonl"
    code = run(["--input", str(_rows(tmp_path / "rows.jsonl")), "--output", str(out), "--metrics", metrics])
    assert code == 2
    err = capsys.readouterr().err
    assert f"error: --metrics {metrics!r} names no metric" in err and "scored" not in err
    assert not out.exists()


@pytest.mark.parametrize("run", [score_main, _score_texts], ids=["scoring.cli", "score_texts"])
@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_an_input_with_no_rows_is_refused_naming_the_file(tmp_path, capsys, model_servers_restored, run, content):
    rows, out = tmp_path / "rows.jsonl", tmp_path / "scores.jsonl"
    rows.write_text(content, encoding="utf-8")
    code = run(["--input", str(rows), "--output", str(out), "--metrics", "rouge1"])
    assert code == 2
    err = capsys.readouterr().err
    assert f"error: {rows}: no rows to score" in err and "scored 0 rows" not in err
    assert not out.exists()


def _stress_rows(path):
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


@pytest.mark.parametrize("limit", ["0", "-3"])
def test_stress_limit_below_one_is_refused_naming_it(tmp_path, capsys, limit):
    rows = _stress_rows(tmp_path / "rows.jsonl")
    with pytest.raises(SystemExit) as exited:
        stress_main(["--input", str(rows), "--tests", "distractor", "--metrics", "overlap_f1",
                     "--out", str(tmp_path / "o"), "--limit", limit], backend=TinyMetrics())  # fmt: skip
    assert exited.value.code == 2
    assert f"--limit: must be at least 1, not {int(limit)}" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_stress_out_that_is_a_file_is_refused_and_left_alone(tmp_path, capsys):
    rows = _stress_rows(tmp_path / "rows.jsonl")
    taken = tmp_path / "taken.jsonl"
    taken.write_text("kept\n")
    code = stress_main(["--input", str(rows), "--tests", "distractor", "--metrics", "overlap_f1",
                        "--out", str(taken)], backend=TinyMetrics())  # fmt: skip
    assert code == 2
    assert f"error: --out: {taken} exists and is not a folder" in capsys.readouterr().err
    assert taken.read_text() == "kept\n"
