"""The vectorised clustered bootstrap against a plain per-resample loop with the same seed."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.stats as sps

from analysis.stats import AnalysisConfig, ClusterResampler, analyze, prepare_table, win_rates
from analysis.stats.bootstrap import bootstrap_ratios, percentile_interval, two_sided_p
from analysis.stats.errors import InsufficientDataError
from analysis.stats.small_sample import CR2_T
from analysis.stats.synthetic import SyntheticStudy, simulate_comparisons
from tests.analysis.helpers import SQUALITY_RESPONSES, squality_table

SEED = 7
B = 300


def loop_bootstrap(frame: pd.DataFrame, statistic, *, seed: int, n_resamples: int) -> np.ndarray:
    """Reference: draw annotators with replacement, concatenate their rows, recompute with pandas."""
    annotators = sorted(frame["annotator"].unique())
    groups = {a: g for a, g in frame.groupby("annotator")}
    idx = np.random.default_rng(seed).integers(0, len(annotators), size=(n_resamples, len(annotators)))
    out = []
    for b in range(n_resamples):
        sample = pd.concat([groups[annotators[i]] for i in idx[b]], ignore_index=True)
        out.append(statistic(sample))
    return np.asarray(out, dtype=float)


def persona_strong_round1(frame: pd.DataFrame) -> float:
    r1 = frame[frame["stage"] == "round1"]
    left = (r1["left_model"] == "strong") & (r1["left_condition"] == "persona")
    right = (r1["right_model"] == "strong") & (r1["right_condition"] == "persona")
    wins = ((left & (r1["choice"] == "left")) | (right & (r1["choice"] == "right"))).sum()
    losses = ((left & (r1["choice"] == "right")) | (right & (r1["choice"] == "left"))).sum()
    return wins / (wins + losses) if wins + losses else np.nan


def left_rate(frame: pd.DataFrame) -> float:
    decided = frame[frame["choice"] != "neither"]
    return float((decided["choice"] == "left").mean()) if len(decided) else np.nan


@pytest.fixture(scope="module")
def small_study() -> pd.DataFrame:
    return simulate_comparisons(SyntheticStudy(n_annotators=12, queries_per_annotator=6, neither_rate=0.15, seed=3))


def test_resampler_weights_match_the_drawn_indices():
    r = ClusterResampler.draw(9, n_resamples=50, seed=SEED)
    idx = r.indices()
    for b in range(50):
        np.testing.assert_array_equal(r.weights[b], np.bincount(idx[b], minlength=9))
    assert r.weights.sum(axis=1).tolist() == [9.0] * 50


@pytest.mark.parametrize(
    ("statistic", "group", "stage", "reference"),
    [
        ("variant", "strong / persona", "round1", persona_strong_round1),
        ("position", "left", "all", left_rate),
    ],
)
def test_vectorised_bootstrap_equals_plain_loop(small_study, statistic, group, stage, reference):
    t = prepare_table(small_study)
    resampler = ClusterResampler.draw(t.n_annotators, n_resamples=B, seed=SEED)
    cell = win_rates(t, resampler=resampler).get(statistic, group, stage)

    reps = loop_bootstrap(small_study, reference, seed=SEED, n_resamples=B)
    point = reference(small_study)
    assert cell.decided_rate == pytest.approx(point, abs=1e-12)
    low, high = np.nanpercentile(reps, [2.5, 97.5])
    assert cell.ci_low == pytest.approx(low, abs=1e-12)
    assert cell.ci_high == pytest.approx(high, abs=1e-12)
    valid = np.isfinite(reps)
    extreme = np.abs(reps[valid] - point) >= abs(point - 0.5) - 1e-12
    assert cell.p_value == pytest.approx((1 + extreme.sum()) / (1 + valid.sum()), abs=1e-12)
    assert cell.n_valid_resamples == valid.sum()


def test_same_seed_same_numbers_other_seed_other_numbers(small_study):
    # 12 annotators would get small-sample inference (no resampling); the seed is the bootstrap's.
    def config(seed: int) -> AnalysisConfig:
        return AnalysisConfig(seed=seed, n_resamples=200, inference="standard")

    a = analyze(small_study, config=config(1)).win_rates.to_frame()
    b = analyze(small_study, config=config(1)).win_rates.to_frame()
    c = analyze(small_study, config=config(2)).win_rates.to_frame()
    pd.testing.assert_frame_equal(a, b)
    assert not np.allclose(a["ci_low"].fillna(0), c["ci_low"].fillna(0))


def test_p_value_is_one_at_the_null_and_small_far_from_it():
    reps = np.array([[0.45, 0.9], [0.55, 0.95], [0.5, 0.85]])
    p, n = two_sided_p(reps, np.array([0.5, 0.9]), np.array([0.5, 0.5]))
    assert p[0] == 1.0
    assert p[1] == pytest.approx(1 / 4)
    assert n.tolist() == [3, 3]


def test_undefined_resamples_are_left_out():
    # Annotator 0 has the only decided match; resamples without annotator 0 have no ratio.
    num = np.array([[1.0], [0.0]])
    den = np.array([[1.0], [0.0]])
    r = ClusterResampler.draw(2, n_resamples=400, seed=1)
    out = bootstrap_ratios(num, den, resampler=r, null=np.array([0.5]), confidence_level=0.95)
    without = int((r.weights[:, 0] == 0).sum())
    assert out.n_valid[0] == 400 - without
    assert out.estimate[0] == 1.0


def test_neither_is_not_a_loss(small_study):
    t = prepare_table(small_study)
    cell = win_rates(t, resampler=ClusterResampler.draw(t.n_annotators, n_resamples=50, seed=0)).get(
        "position", "left", "all"
    )
    decided = small_study[small_study["choice"] != "neither"]
    assert cell.wins + cell.losses == len(decided)
    assert cell.neither == int((small_study["choice"] == "neither").sum())
    assert cell.n == len(small_study)
    assert cell.decided_rate == pytest.approx((decided["choice"] == "left").mean())


@pytest.mark.skipif(not SQUALITY_RESPONSES.exists(), reason="shared SQuALITY data not present")
def test_vectorised_bootstrap_equals_plain_loop_on_real_rankings():
    frame = squality_table()

    def bart_dpr_beats_bart(sample: pd.DataFrame) -> float:
        pair = sample[(sample["left_model"] == "bart") & (sample["right_model"] == "bart-dpr")]
        decided = pair[pair["choice"] != "neither"]
        return float((decided["choice"] == "right").mean()) if len(decided) else np.nan

    t = prepare_table(frame)
    cell = win_rates(t, resampler=ClusterResampler.draw(t.n_annotators, n_resamples=B, seed=SEED)).get(
        "head_to_head", "bart vs bart-dpr", "round1"
    )
    reps = loop_bootstrap(frame, bart_dpr_beats_bart, seed=SEED, n_resamples=B)
    # The cell counts bart's wins; the loop counts bart-dpr's, so the two distributions mirror at 0.5.
    assert cell.decided_rate == pytest.approx(1 - bart_dpr_beats_bart(frame), abs=1e-12)
    low, high = np.nanpercentile(1 - reps, [2.5, 97.5])
    assert (cell.ci_low, cell.ci_high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))


# --- Edges of the ratio bootstrap, stated one by one ---------------------------------------------------------


def test_a_cell_with_no_decided_match_is_undefined_not_zero():
    # Two annotators, neither with a decided match in the cell: no ratio, no interval, no test.
    zero = np.zeros((2, 1))
    r = ClusterResampler.draw(2, n_resamples=40, seed=2)
    out = bootstrap_ratios(zero, zero, resampler=r, null=np.array([0.5]), confidence_level=0.95)
    assert np.isnan(out.estimate[0])
    assert np.isnan(out.ci_low[0]) and np.isnan(out.ci_high[0])
    assert np.isnan(out.p_value[0])
    assert out.n_valid.tolist() == [0]
    assert out.numerator.tolist() == [0.0] and out.denominator.tolist() == [0.0]


def test_p_is_nan_when_every_resample_is_undefined():
    reps = np.full((5, 1), np.nan)
    p, n = two_sided_p(reps, np.array([0.8]), np.array([0.5]))
    assert np.isnan(p[0]) and n.tolist() == [0]


def test_p_is_nan_without_a_null_or_an_estimate():
    reps = np.array([[0.6, 0.6], [0.7, 0.7], [0.8, 0.8]])
    p, n = two_sided_p(reps, np.array([0.7, np.nan]), np.array([np.nan, 0.5]))
    assert np.isnan(p).all() and n.tolist() == [3, 3]


def test_a_resample_as_far_from_the_estimate_as_the_null_counts_as_extreme():
    # estimate 0.7, null 0.5: resamples 0.9 and 0.5 are exactly 0.2 away (up to rounding), 0.7 and 0.8 are not.
    reps = np.array([[0.9], [0.5], [0.7], [0.8]])
    p, n = two_sided_p(reps, np.array([0.7]), np.array([0.5]))
    assert p[0] == pytest.approx((1 + 2) / (1 + 4)) and n.tolist() == [4]


def test_ratios_with_their_totals_intervals_and_p_values_by_hand():
    # Three annotators: wins 3/4, 1/4, 2/2. Resample weights are given, so every replicate is known.
    num = np.array([[3.0, 0.0], [1.0, 0.0], [2.0, 1.0]])
    den = np.array([[4.0, 0.0], [4.0, 0.0], [2.0, 2.0]])
    weights = np.array([[1, 1, 1], [3, 0, 0], [0, 3, 0], [0, 0, 3], [2, 1, 0]], dtype=float)
    r = ClusterResampler(n_clusters=3, n_resamples=5, seed=0, weights=weights)
    out = bootstrap_ratios(num, den, resampler=r, null=np.array([0.5, np.nan]), confidence_level=0.5)
    assert out.numerator.tolist() == [6.0, 1.0] and out.denominator.tolist() == [10.0, 2.0]
    assert out.estimate.tolist() == pytest.approx([0.6, 0.5])
    reps = np.array([0.6, 0.75, 0.25, 1.0, 7 / 12])
    low, high = np.percentile(reps, [25, 75])
    assert (out.ci_low[0], out.ci_high[0]) == (pytest.approx(low), pytest.approx(high))
    # |rep - 0.6| >= 0.1: 0.75, 0.25, 1.0 -> p = (1 + 3) / (1 + 5).
    assert out.p_value[0] == pytest.approx(4 / 6)
    # The second cell: only the resamples that draw annotator 2 have a ratio (0.5 each); no null, no p.
    assert out.n_valid.tolist() == [5, 2]
    assert (out.ci_low[1], out.ci_high[1]) == (0.5, 0.5)
    assert np.isnan(out.p_value[1])
    assert out.method == "cluster-bootstrap"


def test_one_annotator_gives_an_estimate_but_no_interval_or_p():
    r = ClusterResampler.draw(1, n_resamples=20, seed=4)
    out = bootstrap_ratios(
        np.array([[3.0]]), np.array([[4.0]]), resampler=r, null=np.array([0.5]), confidence_level=0.95
    )
    assert out.estimate.tolist() == [0.75]
    assert np.isnan(out.ci_low[0]) and np.isnan(out.ci_high[0]) and np.isnan(out.p_value[0])
    assert out.n_valid.tolist() == [20]
    # The same with the small-sample method: one annotator has no spread to estimate.
    small = bootstrap_ratios(
        np.array([[3.0]]), np.array([[4.0]]), resampler=r, null=np.array([0.5]), confidence_level=0.95, method=CR2_T
    )
    assert np.isnan(small.ci_low[0]) and np.isnan(small.p_value[0]) and small.method == CR2_T


def test_cr2_method_gives_the_t_test_of_annotator_rates():
    rates = np.array([0.7, 0.3, 0.5, 0.9])
    wins, decided = (rates * 10)[:, None], np.full((4, 1), 10.0)
    r = ClusterResampler.draw(4, n_resamples=30, seed=0)
    out = bootstrap_ratios(wins, decided, resampler=r, null=np.array([0.5]), confidence_level=0.9, method=CR2_T)
    half = sps.t.ppf(0.95, 3) * rates.std(ddof=1) / 2
    assert (out.ci_low[0], out.ci_high[0]) == (pytest.approx(0.6 - half), pytest.approx(0.6 + half))
    assert out.p_value[0] == pytest.approx(sps.ttest_1samp(rates, 0.5).pvalue, rel=1e-10)
    assert out.method == CR2_T and out.n_valid.tolist() == [30]
    with pytest.raises(ValueError, match=r"^unknown ratio inference method 'wild'$"):
        bootstrap_ratios(wins, decided, resampler=r, null=np.array([0.5]), confidence_level=0.9, method="wild")


def test_percentile_interval_by_hand_and_nan_for_an_undefined_column():
    reps = np.column_stack([np.arange(101, dtype=float), np.full(101, np.nan)])
    reps[:10, 0] = np.nan  # left out, not counted as values: 10 .. 100 remain
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        low, high = percentile_interval(reps, 0.9)
    assert low[0] == pytest.approx(10 + 0.05 * 90) and high[0] == pytest.approx(10 + 0.95 * 90)
    assert np.isnan(low[1]) and np.isnan(high[1])
    assert low.dtype == np.float64


def test_resampler_refuses_no_annotator_and_no_resample_with_a_message():
    with pytest.raises(InsufficientDataError, match=r"^a clustered bootstrap needs at least one annotator$"):
        ClusterResampler.draw(0, n_resamples=10, seed=1)
    with pytest.raises(ValueError, match=r"^n_resamples must be positive$"):
        ClusterResampler.draw(3, n_resamples=0, seed=1)
    one = ClusterResampler.draw(1, n_resamples=1, seed=1)
    assert one.weights.tolist() == [[1.0]] and one.indices().tolist() == [[0]]
    r = ClusterResampler.draw(3, n_resamples=4, seed=1)
    assert (r.n_clusters, r.n_resamples, r.seed) == (3, 4, 1)
    assert r.weights.dtype == np.float64 and r.indices().dtype == np.int64
    with pytest.raises(ValueError, match=r"^per-cluster sums do not match the number of annotators$"):
        r.resample_sums(np.ones((2, 1)))


def test_resample_sums_are_the_drawn_annotators_totals():
    r = ClusterResampler.draw(3, n_resamples=6, seed=9)
    per = np.array([[1.0, 10.0], [2.0, 20.0], [4.0, 40.0]])
    expected = np.array([[per[draw, k].sum() for k in range(2)] for draw in r.indices()])
    np.testing.assert_array_equal(r.resample_sums(per), expected)


def test_two_annotators_are_enough_for_an_interval_and_a_p_value():
    num, den = np.array([[3.0], [1.0]]), np.array([[4.0], [4.0]])
    weights = np.array([[1, 1], [2, 0], [0, 2]], dtype=float)
    r = ClusterResampler(n_clusters=2, n_resamples=3, seed=0, weights=weights)
    out = bootstrap_ratios(num, den, resampler=r, null=np.array([0.5]), confidence_level=0.5)
    # Replicates 0.5, 0.75, 0.25 around the estimate 0.5, which is the null: p = (1 + 3) / (1 + 3).
    assert (out.ci_low[0], out.ci_high[0]) == (pytest.approx(0.375), pytest.approx(0.625))
    assert out.p_value[0] == 1.0


def test_a_ratio_of_fractional_sums_is_not_rounded():
    # Weighted counts: 0.25 of 0.5 is one half, in the estimate and in every replicate.
    num, den = np.array([[0.125], [0.125]]), np.array([[0.25], [0.25]])
    r = ClusterResampler.draw(2, n_resamples=10, seed=1)
    out = bootstrap_ratios(num, den, resampler=r, null=np.array([0.5]), confidence_level=0.95)
    assert out.estimate.tolist() == [0.5]
    assert (out.ci_low[0], out.ci_high[0]) == (0.5, 0.5)
