import math

import pytest

from scoring.core.longdoc import TfidfEmbedder
from scoring.stress import run_stress
from scoring.stress.datasets import squality_rows
from scoring.stress.longdoc import long_document_analysis
from scoring.stress.perturb import StressRow
from tests.scoring.stress.support import TinyMetrics


@pytest.fixture(scope="module")
def story():
    rows = squality_rows(1)
    assert len(rows[0]["source"].split()) > 3000  # a real long document
    return StressRow.from_mapping(rows[0])


def test_window_sweep_on_one_squality_story(story):
    res = long_document_analysis([story], ["overlap_f1", "length"], TinyMetrics(), embedder=TfidfEmbedder())
    assert res.windows == (0, 1, 2) and res.n_documents == 1 and res.n_sentences > 5
    sweep = res.window_means["overlap_f1"]
    assert all(0.0 <= v <= 1.0 for v in sweep)
    # wider snippets hold more of the sentence's words but dilute precision: the score must change with w
    assert len(set(sweep)) > 1
    assert res.skipped == {"length": "reads neither source nor reference, so a snippet cannot change it"}
    assert sum(res.bin_counts) == res.n_sentences and len(res.bin_counts) == 5
    assert res.bin_window == 1
    assert any(math.isfinite(v) for v in res.bin_means["overlap_f1"])
    d = res.to_dict()
    assert d["document_scores"]["overlap_f1"][story.id] == list(sweep)
    assert len(d["bin_labels"]) == 5


def test_long_document_in_a_run_report(story, tmp_path):
    report = run_stress([story], ["long_document"], ["overlap_f1"], seed=0, out_dir=tmp_path, backend=TinyMetrics(),
                        long_document_embedder=TfidfEmbedder())  # fmt: skip
    assert report.long_document is not None
    assert report.results == ()
    page = (tmp_path / "report.html").read_text()
    assert "Retrieval window sweep" in page and "claim-similarity bin" in page
