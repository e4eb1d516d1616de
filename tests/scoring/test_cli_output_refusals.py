"""score_texts / python -m scoring.cli and stress_test refuse an output they cannot write before any scoring."""

from __future__ import annotations

import json

import pytest

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
