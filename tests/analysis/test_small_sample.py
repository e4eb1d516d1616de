"""Small-sample inference: CR2 against closed forms and the general formula, CR0/CR1 against statsmodels,
false-positive rates under the null, and the few-annotators warning in the report, JSON, HTML and CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import linalg
from scipy import stats as sps

from analysis.cli import main
from analysis.report import render_html, report_dict
from analysis.stats import AnalysisConfig, ClusterResampler, analyze
from analysis.stats.bootstrap import bootstrap_ratios
from analysis.stats.null_simulation import null_rejections
from analysis.stats.small_sample import BOOTSTRAP, CR1_NORMAL, CR2_T, cluster_vcov, ratio_cr2
from analysis.stats.synthetic import SyntheticStudy, simulate_comparisons


def _clustered_normal(sizes: list[int], seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(len(sizes)), sizes)
    y = rng.normal(size=len(groups)) + rng.normal(0.0, 0.7, len(sizes))[groups]
    return y, groups


def test_cr2_of_a_balanced_mean_is_the_variance_of_annotator_means_over_g():
    # Bell & McCaffrey (2002): with equal clusters, CR2 of the mean is s^2 / G of the cluster means.
    y, groups = _clustered_normal([5] * 6, seed=1)
    x = np.ones((len(y), 1))
    v = cluster_vcov(x, y - y.mean(), groups, kind="CR2")
    means = np.array([y[groups == g].mean() for g in range(6)])
    assert v[0, 0] == pytest.approx(means.var(ddof=1) / 6, rel=1e-12)


def test_cr2_of_a_cluster_level_difference_is_the_welch_variance():
    # Imbens & Kolesar (2016): with a cluster-level binary regressor (equal clusters within each arm), CR2 of
    # the difference in means equals the unpooled two-sample variance of the cluster means.
    y, groups = _clustered_normal([4, 4, 4, 6, 6, 6, 6, 6], seed=2)
    d = (groups < 3).astype(float)
    x = np.column_stack([np.ones(len(y)), d])
    b = np.linalg.lstsq(x, y, rcond=None)[0]
    v = cluster_vcov(x, y - x @ b, groups, kind="CR2")
    means = np.array([y[groups == g].mean() for g in range(8)])
    assert v[1, 1] == pytest.approx(means[:3].var(ddof=1) / 3 + means[3:].var(ddof=1) / 5, rel=1e-12)


def test_ratio_cr2_on_equal_annotators_is_the_one_sample_t_test_of_their_rates():
    wins = np.array([6.0, 4.0, 5.0, 7.0])
    decided = np.full(4, 10.0)
    out = ratio_cr2(wins[:, None], decided[:, None], null=np.array([0.5]), confidence_level=0.95)
    ref = sps.ttest_1samp(wins / decided, 0.5)
    assert out.p_value[0] == pytest.approx(ref.pvalue, rel=1e-10)
    assert out.df[0] == 3
    half = sps.t.ppf(0.975, 3) * (wins / decided).std(ddof=1) / 2
    assert (out.ci_low[0], out.ci_high[0]) == (pytest.approx(0.55 - half), pytest.approx(0.55 + half))


def test_ratio_cr2_with_no_spread_between_annotators_is_not_certain():
    # Three annotators lost every match (0/2, 0/3, 0/1): no interval, and the exact sign-flip p-value:
    # all three annotators on one side of 0.5 has probability 2 / 2^3 under the null.
    out = ratio_cr2(
        np.zeros((3, 2)),
        np.array([[2.0, 2.0], [3.0, 3.0], [1.0, 1.0]]),
        null=np.array([0.5, 0.0]),
        confidence_level=0.95,
    )
    assert np.isnan(out.ci_low).all() and np.isnan(out.ci_high).all()
    assert out.p_value.tolist() == [0.25, 1.0]


def _logit_data(seed: int = 3, *, categorical: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Clustered logit data; ``categorical`` repeats design rows within clusters, as the study's factors do."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(3, 12, size=7) * (3 if categorical else 1)
    groups = np.repeat(np.arange(7), sizes)
    n = len(groups)
    x1 = rng.integers(0, 3, size=n).astype(float) if categorical else rng.normal(size=n)
    x = np.column_stack([np.ones(n), x1, (rng.random(n) < 0.4).astype(float)])
    eta = 0.3 + 0.8 * x[:, 1] - 0.5 * x[:, 2] + rng.normal(0, 0.8, 7)[groups]
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
    return x, y, groups


@pytest.mark.parametrize(("kind", "correction"), [("CR0", False), ("CR1", True)])
def test_cr0_and_cr1_of_a_logit_equal_statsmodels(kind, correction):
    x, y, groups = _logit_data()
    fit = sm.GLM(y, x, family=sm.families.Binomial()).fit(
        tol=1e-12, cov_type="cluster", cov_kwds={"groups": groups, "use_correction": correction}
    )
    v = fit.mu * (1 - fit.mu)
    ours = cluster_vcov(v[:, None] * x, y - fit.mu, groups, weights=1 / v, kind=kind)
    np.testing.assert_allclose(ours, fit.cov_params(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("categorical", [False, True], ids=["distinct-rows", "repeated-rows"])
def test_glm_cr2_equals_clubsandwich_written_out(categorical):
    """clubSandwich's vcovCR(glm, type = "CR2") step by step with dense matrices (R/glm.R, R/CR-adjustments.R):
    U = dmu/deta X, e = y - mu, W = 1/V(mu), Theta = V(mu); M = (U'WU)^-1; for each cluster
    G_j = chol(Theta_j) (I - U_j M U_j' W_j) Theta_j chol(Theta_j)', A_j = chol(Theta_j)' G_j^(-1/2) chol(Theta_j);
    V = M (sum_j U_j' W_j A_j e_j e_j' A_j' W_j U_j) M."""
    x, y, groups = _logit_data(seed=5, categorical=categorical)
    fit = sm.GLM(y, x, family=sm.families.Binomial()).fit(tol=1e-12)
    mu = fit.mu
    v = mu * (1 - mu)
    u_all, e_all, w_all = v[:, None] * x, y - mu, np.diag(1 / v)
    m = np.linalg.inv(u_all.T @ w_all @ u_all)
    meat = np.zeros((3, 3))
    for g in np.unique(groups):
        rows = groups == g
        u, e, w, theta = u_all[rows], e_all[rows], w_all[np.ix_(rows, rows)], np.diag(v[rows])
        r = linalg.cholesky(theta)  # upper triangular, r' r = theta, as R's chol()
        ih = np.eye(rows.sum()) - u @ m @ u.T @ w
        g_mat = r @ ih @ theta @ r.T
        a = r.T @ linalg.inv(linalg.sqrtm(g_mat).real) @ r
        score = u.T @ w @ a @ e
        meat += np.outer(score, score)
    reference = m @ meat @ m
    np.testing.assert_allclose(cluster_vcov(u_all, e_all, groups, weights=1 / v, kind="CR2"), reference, rtol=1e-8)
    # The working weights vary within clusters here, so CR2 is not CR1 rescaled.
    cr1 = cluster_vcov(u_all, e_all, groups, weights=1 / v, kind="CR1")
    ratio = np.diag(reference) / np.diag(cr1)
    assert ratio.max() - ratio.min() > 1e-3


# --- False positives under the null -------------------------------------------------------------------------
# The seeds are fixed, so these counts are deterministic; the bounds are also safe for other seeds: with
# 3,000 studies a method whose true rate is 6% exceeds 9% with probability < 1e-9 and the bootstrap (true
# rate about 15% at G = 4) falls below 12% with probability < 1e-5; with 400 logit fits a true 5% exceeds
# 9.5% with probability about 2e-5 (binomial tails).


def _default_methods() -> tuple[str, str]:
    """The methods analyze() picks by default for a study of 4 annotators."""
    report = analyze(simulate_comparisons(SyntheticStudy(n_annotators=4, seed=1)))
    assert report.regression is not None
    return report.win_rates.method, report.regression.method


def test_default_win_rate_test_holds_its_level_with_four_annotators():
    win_method, _ = _default_methods()
    run = null_rejections(4, reps=3_000, resamples=199, logit=False, seed=11)
    rate = {BOOTSTRAP: run.bootstrap_rate, CR2_T: run.cr2_rate_rate}[win_method]
    assert 0.025 <= rate <= 0.09, f"{win_method} rejected a true null in {rate:.1%} of studies"
    assert run.bootstrap_rate >= 0.12  # the old default is too liberal here: the reason for the switch


def test_default_logit_holds_its_level_with_four_annotators():
    _, logit_method = _default_methods()
    run = null_rejections(4, reps=400, resamples=9, logit=True, logit_cr1=logit_method == CR1_NORMAL, seed=12)
    assert run.logit_fits >= 390
    rate = run.logit_cr2_rate if logit_method == CR2_T else run.logit_cr1_rate
    assert rate <= 0.095, f"{logit_method} rejected a true null in {rate:.1%} of studies"


def test_switching_small_sample_off_brings_the_liberal_bootstrap_back():
    frame = simulate_comparisons(SyntheticStudy(n_annotators=4, seed=1))
    report = analyze(frame, config=AnalysisConfig(inference="standard"))
    assert report.win_rates.method == BOOTSTRAP and report.regression is not None
    assert report.regression.method == CR1_NORMAL
    assert "switched off" in report.warnings[0]


def test_win_rate_cr2_matches_bootstrap_ratios_path():
    wins = np.array([[7.0], [3.0], [5.0], [9.0]])
    decided = np.full((4, 1), 10.0)
    r = ClusterResampler.draw(4, n_resamples=50, seed=0)
    out = bootstrap_ratios(wins, decided, resampler=r, null=np.array([0.5]), confidence_level=0.95, method=CR2_T)
    assert out.p_value[0] == pytest.approx(sps.ttest_1samp(wins[:, 0] / 10, 0.5).pvalue, rel=1e-10)
    with pytest.raises(ValueError, match="unknown ratio inference"):
        bootstrap_ratios(wins, decided, resampler=r, null=np.array([0.5]), confidence_level=0.95, method="wild")


# --- Where the reader sees it -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def few() -> pd.DataFrame:
    return simulate_comparisons(SyntheticStudy(n_annotators=6, queries_per_annotator=6, seed=4))


def test_few_annotators_use_cr2_and_warn_in_report_json_and_html(few):
    report = analyze(few, config=AnalysisConfig(n_resamples=200))
    assert report.win_rates.method == CR2_T
    assert report.regression is not None and report.regression.method == CR2_T
    assert report.regression.cov_type == "CR2 (annotator), t(5)"
    assert all(c.df == 5 for c in report.regression.coefficients)
    assert len(report.warnings) == 1 and "few annotators: 6 (fewer than 40)" in report.warnings[0]
    data = json.loads(json.dumps(report_dict(report)))
    assert data["warnings"] == list(report.warnings)
    assert data["win_rates"]["method"] == "cr2-t" and data["regression"]["method"] == "cr2-t"
    html = render_html(report)
    box = html.index("class='warning'")
    assert html.index("<h2>Win rates</h2>") < box < html.index("<h3>")
    assert "few annotators: 6" in html[box:] and "CR2" in html
    assert "WARNING: few annotators" in report.summary()


def test_many_annotators_keep_the_bootstrap_and_do_not_warn():
    frame = simulate_comparisons(SyntheticStudy(n_annotators=40, queries_per_annotator=3, seed=4))
    report = analyze(frame, config=AnalysisConfig(n_resamples=100))
    assert report.win_rates.method == BOOTSTRAP and report.regression is not None
    assert report.regression.method == CR1_NORMAL and report.warnings == ()
    assert "class='warning'" not in render_html(report)


def test_cli_prints_the_warning(few, tmp_path, capsys):
    path = tmp_path / "few.csv"
    few.to_csv(path, index=False)
    assert main(["--comparisons", str(path), "--out", str(tmp_path / "out"), "--resamples", "100", "--no-export"]) == 0
    out = capsys.readouterr().out
    assert "warning: few annotators: 6 (fewer than 40)" in out


def test_inference_setting_is_validated():
    with pytest.raises(ValueError, match="inference must be one of"):
        AnalysisConfig(inference="wild")
    with pytest.raises(ValueError, match="small_sample_below"):
        AnalysisConfig(small_sample_below=0)
