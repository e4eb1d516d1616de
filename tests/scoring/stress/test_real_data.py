"""The deterministic suite on real SciTLDR pairs and one SQuALITY story with the real metric suite."""

import math

import pytest

from scoring.core.longdoc import TfidfEmbedder
from scoring.stress import Verdict, run_stress
from scoring.stress.datasets import scitldr_rows, squality_rows
from scoring.stress.longdoc import long_document_analysis
from scoring.stress.perturb import StressRow
from scoring.stress.runner import CoreMetrics

METRICS = ["rouge1", "rougeL", "chrf", "coverage", "summary_length"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    rows = scitldr_rows(40)
    assert len(rows) == 40
    return run_stress(rows, ["deterministic"], METRICS, seed=0, out_dir=tmp_path_factory.mktemp("stress"))


def test_rouge1_passes_distractor_with_rho_minus_one(report):
    r = report.result("rouge1", "distractor")
    assert r.rho == -1.0 and r.monotonicity == 1.0 and r.verdict is Verdict.PASS
    assert r.n_scored == (40,) * 6
    assert r.cohens_d < 0


def test_incremental_addition_raises_overlap_metrics(report):
    for metric in ("rouge1", "chrf"):
        r = report.result(metric, "incremental")
        assert r.level_means[0] < r.level_means[-1]
        assert r.rho > 0.4 and r.passed


def test_summary_length_fails_distractor_in_the_wrong_direction(report):
    r = report.result("summary_length", "distractor")
    assert r.rho == 1.0 and r.verdict is Verdict.FAIL


def test_added_source_text_is_a_two_level_stable_test(report):
    r = report.result("rouge1", "added_source_text")
    assert r.levels == ("original", "+source sentence")
    assert r.rho_verdict is Verdict.NOT_APPLICABLE
    assert math.isfinite(r.mean_abs_change) and r.mean_abs_change > 0


def test_report_on_real_data_has_the_grid(report):
    assert set(report.grid()) == set(METRICS)
    page = open(report.files["html"]).read()
    assert page.count("<svg") >= 3


def test_window_sweep_with_a_real_metric_on_one_squality_story():
    story = StressRow.from_mapping(squality_rows(1)[0])
    res = long_document_analysis([story], ["rouge1", "coverage"], CoreMetrics(), embedder=TfidfEmbedder())
    for metric in ("rouge1", "coverage"):
        sweep = res.window_means[metric]
        assert len(sweep) == 3 and all(math.isfinite(v) for v in sweep)
    # a summary sentence's words are more often found in a wider snippet
    cov = res.window_means["coverage"]
    assert cov[0] <= cov[1] <= cov[2]
    assert sum(res.bin_counts) == res.n_sentences
