"""The public contract (metric_specs, score_rows, OFFLINE_METRICS) and the CLI end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rouge_score import rouge_scorer

from scoring.cli import main
from scoring.core import api
from scoring.core.api import metric_specs, score_rows
from scoring.core.registry import FAMILIES, INPUTS
from tests.support.openai_standin import openai_standin

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_every_metric_has_a_complete_spec() -> None:
    specs = metric_specs()
    names = [s.name for s in specs]
    assert len(names) == len(set(names))
    for spec in specs:
        assert spec.family in FAMILIES
        assert spec.needs <= INPUTS
        assert spec.version and spec.description
    for name in ("rouge1", "rouge2", "rougeL", "bleu", "chrf", "meteor", "coverage", "novel_3gram", "ar_risk",
                 "bertscore_f1", "supert", "blanc_help", "summaqa_f1", "geval_overall", "persona_overall",
                 "factscore", "persona_precision", "persona_recall"):  # fmt: skip
        assert name in names
    assert metric_specs(["ar_2", "rouge1"])[0].needs == frozenset({"source", "reference"})


def test_unknown_metrics_raise_naming_them() -> None:
    with pytest.raises(ValueError, match="unknown metrics: rouge9, bertscore"):
        score_rows([{"id": 1, "summary": "x", "reference": "y"}], ["rouge1", "rouge9", "bertscore"])
    with pytest.raises(ValueError, match="unknown metric: nope"):
        metric_specs(["nope"])


def test_offline_metrics_exclude_judges_and_unshipped_models() -> None:
    offline = api.OFFLINE_METRICS
    assert {"rouge1", "ar_risk", "coverage", "meteor"} <= set(offline)
    assert not {"geval_overall", "factscore", "blanc_help", "summaqa_f1"} & set(offline)
    assert ("bertscore_f1" in offline) == api.embeddings_available()


def test_the_list_for_pages_is_the_same_without_importing_torch() -> None:
    """The research dashboard lists the offline metrics; with the embeddings extra installed it must list the
    embedding metrics without importing torch in the web process (tens of seconds and hundreds of MiB cold)."""
    probe = (
        "import json, sys; from scoring.core.api import offline_metrics; "
        "names = offline_metrics(import_check=False); "
        "print(json.dumps({'names': list(names), 'torch': 'torch' in sys.modules}))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert listed["torch"] is False
    assert listed["names"] == list(api.offline_metrics())


def test_missing_inputs_are_per_row_errors_not_exceptions() -> None:
    rows = [
        {"id": "a", "summary": "the cat sat", "reference": "a cat sat", "source": "the cat sat on the mat"},
        {"id": "b", "summary": "the cat sat", "reference": "   "},
        {"id": "c", "summary": "the cat sat"},
    ]
    a, b, c = score_rows(rows, ["rouge1", "coverage", "ar_1"])
    assert a["errors"] == {} and a["rouge1"] > 0 and a["coverage"] == 1.0
    assert b["rouge1"] is None and b["errors"]["rouge1"] == "missing input: reference"
    assert b["errors"]["coverage"] == "missing input: source"
    assert c["errors"]["ar_1"] == "missing input: reference, source"
    assert [r["id"] for r in (a, b, c)] == ["a", "b", "c"]


def test_empty_summary_is_scored_where_defined() -> None:
    (out,) = score_rows([{"id": 1, "summary": "", "reference": "a cat", "source": "a cat sat"}], ["rouge1", "sa_1"])
    assert out["rouge1"] == 0.0
    assert out["sa_1"] is None and "summary has 0 tokens" in out["errors"]["sa_1"]


def test_sentence_lists_are_joined() -> None:
    (listed,) = score_rows([{"id": 1, "summary": "b c", "source": ["a b.", "c d."]}], ["coverage"])
    assert listed["coverage"] == 1.0


def _scitldr_jsonl(rows: list[dict], path: Path) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
        handle.write(json.dumps({"id": "no-reference", "summary": rows[0]["summary"], "source": rows[0]["source"]}))


def test_cli_end_to_end_on_scitldr(
    tmp_path: Path, scitldr_rows: list[dict], capsys: pytest.CaptureFixture[str]
) -> None:
    rows = scitldr_rows[:8]
    source, target = tmp_path / "rows.jsonl", tmp_path / "scores.jsonl"
    _scitldr_jsonl(rows, source)
    code = main(["--input", str(source), "--output", str(target), "--metrics", "rouge1,ar_2,ar_risk,coverage"])
    assert code == 0
    out = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
    assert [o["id"] for o in out] == [r["id"] for r in rows] + ["no-reference"]
    scorer = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)
    for row, scored in zip(rows, out, strict=False):
        assert scored["rouge1"] == pytest.approx(scorer.score(row["reference"], row["summary"])["rouge1"].fmeasure)
        assert scored["ar_risk_band"] in {"extractive", "balanced", "moderate", "high"}
    last = out[-1]
    assert last["coverage"] is not None
    assert last["ar_2"] is None and last["errors"]["ar_2"] == "missing input: reference"
    assert "scored 9 rows on 4 metrics" in capsys.readouterr().err


def test_cli_rejects_unknown_metric_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "rows.jsonl"
    good.write_text('{"id": 1, "summary": "x"}\n', encoding="utf-8")
    assert main(["--input", str(good), "--metrics", "rouge1,rouge4"]) == 2
    assert "unknown metric: rouge4" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "summary": "x"}\nnot json\n', encoding="utf-8")
    assert main(["--input", str(bad), "--metrics", "rouge1"]) == 2
    assert "line 2: not JSON" in capsys.readouterr().err


def test_cli_list_runs_as_a_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scoring.cli", "--list"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:2] == ["metric", "family"]
    meteor = next(line for line in lines if line.startswith("meteor "))
    assert "lexical" in meteor and "reference" in meteor
    assert any(line.startswith("geval_overall ") and " no " in line for line in lines)


def test_progress_bar_reports_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"id": i, "summary": "a cat sat", "reference": "the cat sat"} for i in range(5)]
    score_rows(rows, ["rouge1", "bleu"], progress=True)
    err = capsys.readouterr().err
    assert "scoring" in err and "10/10" in err
    score_rows(rows, ["rouge1"])
    assert capsys.readouterr().err == ""


def test_a_callers_pause_runs_before_each_row_and_changes_no_score() -> None:
    """score_rows(pause=...) is where the platform's research work makes way for annotator work."""
    rows = [
        {"id": n, "summary": f"night shifts disturb sleep {n}", "reference": "night shift work and sleep"}
        for n in range(5)
    ]
    calls: list[int] = []
    paused = score_rows(rows, ["rouge1"], pause=lambda: calls.append(1))
    assert len(calls) == len(rows)
    assert paused == score_rows(rows, ["rouge1"])


def test_cli_reads_a_judges_reply_under_the_cap_its_environment_sets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # MODEL_SERVER_MAX_RESPONSE_BYTES is what a failed call's reason tells the reader to raise: it must work here
    # too, not only in the platform's workers.
    from modelserver import client

    monkeypatch.setattr(client, "_max_response_bytes", client._max_response_bytes)  # put back after the test
    monkeypatch.delenv("JUDGE_CACHE_DIR", raising=False)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "a", "summary": "The trial found fewer errors on day shifts."}) + "\n")
    out = tmp_path / "scores.jsonl"
    args = ["--input", str(rows), "--output", str(out), "--metrics", "geval_fluency", "--judge-model", "m"]
    with openai_standin(lambda body: "4") as server:
        args += ["--judge-base-url", server.base_url]
        monkeypatch.setenv("MODEL_SERVER_MAX_RESPONSE_BYTES", "200")  # a chat completion's JSON is more than that
        assert main(args) == 0
        capped = json.loads(out.read_text())
        monkeypatch.setenv("MODEL_SERVER_MAX_RESPONSE_BYTES", str(64 * 1024))
        assert main(args) == 0
        read = json.loads(out.read_text())
        monkeypatch.setenv("MODEL_SERVER_MAX_RESPONSE_BYTES", "a lot")
        capsys.readouterr()
        assert main(args) == 2
    assert capped["geval_fluency"] is None
    assert "larger than 200 bytes" in capped["errors"]["geval_fluency"]
    assert "MODEL_SERVER_MAX_RESPONSE_BYTES" in capped["errors"]["geval_fluency"]
    assert read["geval_fluency"] == 4
    assert "MODEL_SERVER_MAX_RESPONSE_BYTES must be a whole number of bytes" in capsys.readouterr().err
