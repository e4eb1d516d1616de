"""The vectorised clustered bootstrap against a plain per-resample loop with the same seed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.stats import AnalysisConfig, ClusterResampler, analyze, prepare_table, win_rates
from analysis.stats.bootstrap import bootstrap_ratios, two_sided_p
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
