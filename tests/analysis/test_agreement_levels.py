"""Metric-human alpha at the ordinal level (left < neither < right), against the krippendorff package, and the
default stated: nominal."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest

from analysis.stats import AnalysisConfig, analyze, metric_agreement, prepare_table
from analysis.stats.agreement import VOTE_LEFT, VOTE_NEITHER, VOTE_RIGHT, alpha_threshold_sweep, nominal_alpha
from analysis.stats.bootstrap import ClusterResampler
from analysis.stats.synthetic import SyntheticStudy, simulate_comparisons

RANK = {VOTE_LEFT: 0.0, VOTE_NEITHER: 1.0, VOTE_RIGHT: 2.0}


def ranks(codes: np.ndarray) -> np.ndarray:
    return np.vectorize(lambda c: RANK.get(c, np.nan))(codes)


def test_two_coders_ordinal_alpha_equals_the_packages_over_left_neither_right():
    rng = np.random.default_rng(4)
    a = rng.choice([VOTE_LEFT, VOTE_RIGHT, VOTE_NEITHER], size=300, p=[0.45, 0.4, 0.15])
    b = np.where(rng.random(300) < 0.6, a, rng.choice([VOTE_LEFT, VOTE_RIGHT, VOTE_NEITHER], size=300))
    expected = krippendorff.alpha(reliability_data=np.vstack([ranks(a), ranks(b)]), level_of_measurement="ordinal")
    assert nominal_alpha(a, b, level="ordinal") == pytest.approx(expected, abs=1e-12)
    # A "neither" against a side is half a disagreement: ordinal alpha differs from the nominal one here.
    assert nominal_alpha(a, b) != pytest.approx(expected, abs=1e-3)


@pytest.fixture(scope="module")
def table():
    frame = simulate_comparisons(SyntheticStudy(n_annotators=12, queries_per_annotator=6, n_metrics=2, seed=8))
    return prepare_table(frame)


def test_metric_agreement_and_the_sweep_at_the_ordinal_level(table):
    resampler = ClusterResampler.draw(table.n_annotators, n_resamples=200, seed=2)
    result = metric_agreement(table, resampler=resampler, level="ordinal")
    assert result.level == "ordinal"
    human = ranks(np.where(table.left_won, VOTE_LEFT, np.where(table.right_won, VOTE_RIGHT, VOTE_NEITHER)))
    for m in result.metrics:
        left = table.frame[f"left__{m.metric}"].to_numpy(dtype=float)
        right = table.frame[f"right__{m.metric}"].to_numpy(dtype=float)
        diff = left - right if m.higher_is_better else right - left
        votes = np.where(diff > m.threshold, 0.0, np.where(diff < -m.threshold, 2.0, 1.0))
        expected = krippendorff.alpha(reliability_data=np.vstack([votes, human]), level_of_measurement="ordinal")
        assert m.alpha == pytest.approx(expected, abs=1e-9)
        assert m.ci_low <= m.alpha <= m.ci_high
        (at_threshold,) = alpha_threshold_sweep(
            table, m.metric, [m.threshold], higher_is_better=m.higher_is_better, level="ordinal"
        )
        assert at_threshold.alpha == pytest.approx(expected, abs=1e-9)


def test_the_default_is_nominal_and_the_report_says_which(table):
    assert AnalysisConfig().agreement_level == "nominal"
    report = analyze(table.frame, config=AnalysisConfig(n_resamples=50, agreement_level="ordinal"))
    assert report.agreement is not None and report.agreement.level == "ordinal"
    assert "Krippendorff's alpha (ordinal)" in report.agreement.summary()
    with pytest.raises(ValueError, match="agreement_level must be one of nominal, ordinal"):
        AnalysisConfig(agreement_level="interval")
