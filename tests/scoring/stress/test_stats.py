import math

import numpy as np
import pytest
from scipy import stats as sps

from scoring.stress.stats import (
    Direction,
    Verdict,
    cohens_d,
    compute_statistics,
    level_means,
    mean_absolute_change,
    monotonicity,
    spearman_rho,
)


def test_spearman_matches_scipy_on_noisy_means():
    means = [0.9, 0.7, 0.75, 0.4, 0.2, 0.25]
    expected = sps.spearmanr(range(6), means).statistic
    assert spearman_rho(list(range(6)), means) == pytest.approx(expected)
    # by hand: ranks of means 6,4,5,3,1,2 against 1..6; d^2 = 25+4+4+1+16+16 = 66; 1 - 6*66/(6*35)
    assert expected == pytest.approx(1 - 6 * 66 / 210)


def test_spearman_strictly_decreasing_is_minus_one():
    assert spearman_rho([0, 1, 2, 3], [4.0, 3.0, 2.0, 1.0]) == -1.0


def test_spearman_constant_is_undefined():
    assert math.isnan(spearman_rho([0, 1, 2], [0.5, 0.5, 0.5]))


def test_spearman_skips_undefined_levels():
    assert spearman_rho([0, 1, 2, 3], [1.0, math.nan, 3.0, 4.0]) == pytest.approx(1.0)
    assert math.isnan(spearman_rho([0, 1], [math.nan, 1.0]))


def test_monotonicity_directional_by_hand():
    means = [1.0, 0.8, 0.85, 0.5]  # transitions: -, +, -
    assert monotonicity(means, Direction.DECREASE) == pytest.approx(2 / 3)
    assert monotonicity(means, Direction.INCREASE) == pytest.approx(1 / 3)


def test_monotonicity_stable_uses_five_percent_of_baseline():
    # baseline 2.0 -> tolerance 0.1; changes 0.05 (ok), 0.15 (miss), 0.09 (ok)
    means = [2.0, 2.05, 1.9, 1.99]
    assert monotonicity(means, Direction.STABLE) == pytest.approx(2 / 3)


def test_monotonicity_counts_undefined_transition_as_miss():
    assert monotonicity([1.0, math.nan, 0.5], Direction.DECREASE) == 0.0
    assert monotonicity([1.0, 0.8, math.nan], Direction.DECREASE) == pytest.approx(0.5)


def test_cohens_d_by_hand():
    base = [1.0, 2.0, 3.0]
    last = [2.0, 3.0, 4.0]
    # means differ by 1; both variances 1 -> pooled SD 1 -> d = 1
    assert cohens_d(base, last) == pytest.approx(1.0)
    a, b = np.array([0.2, 0.4, 0.9, 0.5]), np.array([0.1, 0.1, 0.3, 0.2])
    pooled = math.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2)
    assert cohens_d(list(a), list(b)) == pytest.approx((b.mean() - a.mean()) / pooled)


def test_cohens_d_skips_unscored_rows_and_is_undefined_without_spread():
    # only rows 0 and 3 have both: (1, 2) and (5, 6); both variances 8, mean change 1
    assert cohens_d([1.0, None, 3.0, 5.0], [2.0, 9.0, None, 6.0]) == pytest.approx(1 / math.sqrt(8))
    assert math.isnan(cohens_d([1.0, 1.0], [1.0, 1.0]))


def test_mean_absolute_change():
    assert mean_absolute_change([1.0, 2.0, None], [0.5, 2.5, 3.0]) == pytest.approx(0.5)


def test_level_means_ignores_none_and_nan():
    assert level_means([[1.0, None], [3.0, 2.0], [math.nan, 4.0]]) == [2.0, 3.0]


def test_decreasing_metric_passes_distractor():
    scores = [[1.0 - 0.1 * k + 0.01 * r for k in range(6)] for r in range(4)]
    res = compute_statistics(scores, metric="m", test="distractor", direction=Direction.DECREASE)
    assert res.rho == -1.0 and res.monotonicity == 1.0
    assert res.rho_verdict is Verdict.PASS and res.m_verdict is Verdict.PASS and res.passed
    assert res.cohens_d < 0
    assert res.to_dict()["verdict"] == "pass"


def test_constant_metric_is_undefined_and_fails():
    res = compute_statistics([[0.5] * 6] * 3, metric="c", test="distractor", direction=Direction.DECREASE)
    assert res.rho_verdict is Verdict.UNDEFINED
    assert res.verdict is Verdict.UNDEFINED and not res.passed
    d = res.to_dict()
    assert d["rho"] is None and d["cohens_d"] is None


def test_wrong_direction_fails_rho_but_m_is_separate():
    means_up = [[0.1, 0.2, 0.3, 0.25]]
    res = compute_statistics(means_up, metric="m", test="distractor", direction=Direction.DECREASE)
    assert res.rho_verdict is Verdict.FAIL
    assert res.monotonicity == pytest.approx(1 / 3) and res.m_verdict is Verdict.FAIL


def test_stable_thresholds():
    # ranks 3,5,1,2,4 against 1..5: sum d^2 = 22, rho = 1 - 6*22/120 = -0.1; every change < 5%
    stable = [[1.0, 1.02, 0.98, 0.99, 1.01]]
    res = compute_statistics(stable, metric="m", test="lengthen", direction=Direction.STABLE)
    assert res.rho == pytest.approx(-0.1) and res.passed
    drift = [[1.0, 1.2, 1.4, 1.6]]
    res = compute_statistics(drift, metric="m", test="lengthen", direction=Direction.STABLE)
    assert res.rho == 1.0 and res.rho_verdict is Verdict.FAIL and res.m_verdict is Verdict.FAIL


def test_two_level_stable_test_is_judged_by_m():
    res = compute_statistics([[1.0, 1.02]], metric="m", test="paraphrased", direction=Direction.STABLE)
    assert res.rho_verdict is Verdict.NOT_APPLICABLE
    assert res.m_verdict is Verdict.PASS and res.passed
    res = compute_statistics([[1.0, 1.3]], metric="m", test="paraphrased", direction=Direction.STABLE)
    assert res.verdict is Verdict.FAIL
    assert res.mean_abs_change == pytest.approx(0.3)


def test_level_names_must_match():
    with pytest.raises(ValueError):
        compute_statistics([[1.0, 2.0]], metric="m", test="t", direction=Direction.INCREASE, levels=["a"])


def test_rho_of_exactly_the_threshold_passes():
    # ranks 3,1,2,4 against 1..4: sum d^2 = 4+1+1+0 = 6, rho = 1 - 36/60 = 0.4, which scipy returns as 0.39999...
    means = [0.3, 0.1, 0.2, 0.4]
    assert spearman_rho([0, 1, 2, 3], means) == pytest.approx(0.4)
    res = compute_statistics([means], metric="m", test="incremental", direction=Direction.INCREASE)
    assert res.rho_verdict is Verdict.PASS
