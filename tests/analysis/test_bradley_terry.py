"""Bradley-Terry strengths: MM fit against a statsmodels logit, bootstrap, and SQuALITY's real rankings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

from analysis.stats import (
    AnalysisConfig,
    ClusterResampler,
    InsufficientDataError,
    analyze,
    bradley_terry,
    prepare_table,
)
from analysis.stats.bradley_terry import fit_mm
from analysis.stats.synthetic import SyntheticStudy, simulate_comparisons
from tests.analysis.helpers import SQUALITY_RESPONSES, row, squality_table, table


def logit_strengths(frame: pd.DataFrame) -> dict[str, float]:
    """Reference MLE: logit of "left won" on +1/-1 system indicators, no intercept, first system fixed at 0."""
    decided = frame[frame["choice"] != "neither"]
    systems = sorted(set(decided["left_system"]) | set(decided["right_system"]))
    x = np.zeros((len(decided), len(systems)))
    for j, s in enumerate(systems):
        x[:, j] = (decided["left_system"] == s).to_numpy() * 1.0 - (decided["right_system"] == s).to_numpy()
    y = (decided["choice"] == "left").to_numpy().astype(float)
    fit = sm.Logit(y, x[:, 1:]).fit(disp=0, tol=1e-12, maxiter=200)
    theta = np.concatenate([[0.0], fit.params])
    theta -= theta.mean()
    return dict(zip(systems, theta, strict=True))


def test_mm_matches_logit_mle():
    frame = simulate_comparisons(SyntheticStudy(n_annotators=30, queries_per_annotator=8, seed=4))
    result = bradley_terry(prepare_table(frame))
    assert result.converged
    for system, theta in logit_strengths(frame).items():
        assert result.get(system).log_strength == pytest.approx(theta, abs=1e-6)


def test_batched_mm_equals_one_at_a_time():
    rng = np.random.default_rng(0)
    batch = rng.integers(1, 20, size=(5, 4, 4)).astype(float)
    batch[:, np.arange(4), np.arange(4)] = 0
    together, _, _ = fit_mm(batch)
    for b in range(5):
        alone, _, _ = fit_mm(batch[b])
        np.testing.assert_allclose(together[b], alone, atol=1e-8)


def test_system_that_never_loses_is_not_identified_without_a_prior():
    t = table([row(f"a{i}", "left", query_id=f"q{i}") for i in range(4)])
    with pytest.raises(InsufficientDataError, match="not identified"):
        bradley_terry(prepare_table(t))
    result = bradley_terry(prepare_table(t), pseudo_wins=0.5)
    assert result.systems[0].system == "strong/persona"


def test_win_probability_and_intervals():
    frame = simulate_comparisons(SyntheticStudy(n_annotators=40, queries_per_annotator=8, seed=9))
    t = prepare_table(frame)
    result = bradley_terry(t, resampler=ClusterResampler.draw(t.n_annotators, n_resamples=200, seed=1))
    best, worst = result.systems[0], result.systems[-1]
    assert best.system == "strong/persona" and worst.system == "weak/persona"
    assert result.win_probability(best.system, worst.system) > 0.5
    for s in result.systems:
        assert s.ci_low <= s.log_strength <= s.ci_high
    assert result.n_valid_resamples == 200


@pytest.mark.skipif(not SQUALITY_RESPONSES.exists(), reason="shared SQuALITY data not present")
def test_squality_real_rankings():
    frame = squality_table()
    assert frame["annotator"].nunique() == 4
    report = analyze(frame, config=AnalysisConfig(n_resamples=500, seed=3))
    bt = report.bradley_terry
    assert bt is not None
    # Reviewers rank the human-written answers first almost always, and the plain BART model last.
    assert [s.system for s in bt.systems] == ["human/generic", "bart-dpr/generic", "bart/generic"]
    assert bt.get("human/generic").ci_low > bt.get("bart-dpr/generic").ci_high
    h2h = report.win_rates.get("head_to_head", "bart vs human", "round1")
    assert h2h.decided_rate < 0.05 and h2h.p_value < 0.01
    # With four reviewers the clustered interval is wider than a naive binomial one.
    naive_se = np.sqrt(h2h.decided_rate * (1 - h2h.decided_rate) / h2h.decided)
    assert h2h.ci_high - h2h.ci_low >= 2 * 1.96 * naive_se * 0.9
    assert report.regression is None and any("logistic regression skipped" in n for n in report.notes)
