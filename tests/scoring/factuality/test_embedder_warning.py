"""The sentence embedder of the long-document analyses is named in every report, with a warning when it is
the TF-IDF fallback rather than a sentence encoder."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from scoring.core.longdoc import TfidfEmbedder, default_embedder
from scoring.stress import run_stress
from tests.scoring.stress.support import ROWS, TinyMetrics


@pytest.fixture
def no_encoder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """A configured sentence-encoder folder that does not exist: the encoder cannot load here."""
    missing = str(tmp_path / "no-such-encoder")
    monkeypatch.setenv("SCORING_EMBEDDING_MODEL", missing)
    return missing


def test_the_fallback_is_logged_with_its_reason(no_encoder: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="scoring.core.longdoc"):
        embedder = default_embedder()
    assert isinstance(embedder, TfidfEmbedder)
    assert embedder.fallback_reason  # the extra is missing, or the configured model is not here
    assert any("falls back to TF-IDF" in r.getMessage() for r in caplog.records)


def test_the_stress_report_names_the_embedder_and_warns_about_tfidf(no_encoder: str, tmp_path: Path, capsys) -> None:
    from scoring.stress.cli import main

    rows = tmp_path / "rows.jsonl"
    import json

    rows.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:3]))
    out = tmp_path / "out"
    assert main(["--input", str(rows), "--tests", "long_document", "--metrics", "overlap_f1", "--out", str(out)],
                backend=TinyMetrics()) == 0  # fmt: skip
    printed = capsys.readouterr()
    assert "sentence embedder tfidf" in printed.out
    assert "warning: The sentence embedder is TF-IDF" in printed.err
    page = (out / "report.html").read_text()
    assert "sentence embedder <code>tfidf</code>" in page and "<b>Warning:</b> The sentence embedder is TF-IDF" in page


def test_a_chosen_tfidf_embedder_is_named_too(tmp_path: Path) -> None:
    report = run_stress(ROWS[:3], ["long_document"], ["overlap_f1"], seed=0, out_dir=tmp_path, backend=TinyMetrics(),
                        long_document_embedder=TfidfEmbedder())  # fmt: skip
    assert report.long_document.embedder == "tfidf"
    assert "sentence embedder <code>tfidf</code>" in (tmp_path / "report.html").read_text()
