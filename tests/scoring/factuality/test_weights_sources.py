"""Where the factuality metrics' weights come from outside the tests' own folder: the offline Hugging Face cache
(no METRICS_WEIGHTS_DIR at all), and the Django setting METRICS_WEIGHTS_DIR for `manage.py seed_layout`."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import require

require(
    all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers", "tokenizers")),
    "the 'embeddings' extra (torch, transformers) is not installed",
)

from tests.scoring.factuality.tiny import build_classifier, words_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
ROW = {"id": "r", "summary": "The cat sat on the mat.", "source": "The cat sat on the mat. The dog ran in the park."}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"METRICS_WEIGHTS_DIR", "HF_HUB_OFFLINE"}}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def test_weights_in_the_offline_hugging_face_cache_are_found_by_model_id(tmp_path: Path) -> None:
    # The hub cache's layout: models--org--name/snapshots/<commit>/<files>, refs/main naming the commit.
    repo = tmp_path / "hub" / "models--tals--albert-xlarge-vitaminc-mnli"
    commit = "0" * 40
    build_classifier(repo / "snapshots" / commit, words_of([ROW["source"]]), labels=("SUPPORTS", "REFUTES", "NEI"))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(ROW) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "scoring.cli", "--input", str(rows), "--metrics", "summac_zs,unieval"],
        env=_env(HF_HUB_CACHE=str(tmp_path / "hub"), HF_HOME=str(tmp_path / "home")),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (out,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert isinstance(out["summac_zs"], float) and -1.0 <= out["summac_zs"] <= 1.0
    # the other model is in neither place: refused, naming the setting as unset
    assert out["unieval"] is None and "METRICS_WEIGHTS_DIR is not set" in out["errors"]["unieval"]


def test_manage_py_seed_layout_takes_the_weights_folder_from_the_setting(tmp_path: Path) -> None:
    weights = tmp_path / "weights"
    build_classifier(weights / "summac", words_of([ROW["source"]]), labels=("entailment", "neutral", "contradiction"))
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(ROW) + "\n")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "manage.py", "seed_layout", "--input", str(rows), "--metrics", "summac_zs,bartscore",
         "--perturbations", "none", "--embedder", "tfidf", "--out", str(out)],
        env=_env(METRICS_WEIGHTS_DIR=str(weights), METRICS_DEVICE="cpu"),
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["weights_dir"] == str(weights) and manifest["device"] == "cpu"
    assert manifest["weights"]["summac_zs"]["location"] == str(weights / "summac")
    assert "facebook/bart-large-cnn" in manifest["weights"]["bartscore"]["missing"]
    table = (out / "table.txt").read_text()
    assert "bartscore" in table and "METRICS_WEIGHTS_DIR is " + str(weights) in table
