"""Behaviour at the edges, stated once each: the cases where a changed comparison or default in alpha, the
bootstrap or the abstractiveness score went unnoticed by every other test (issue 29's surviving mutants).
Expected values are worked by hand or come from the krippendorff package."""

from __future__ import annotations

import math

import krippendorff
import numpy as np
import pytest

from analysis.stats.alpha import clustered_alpha, krippendorff_alpha
from analysis.stats.bootstrap import ClusterResampler, bootstrap_ratios, two_sided_p
from scoring.core.abstractiveness import harmonic_mean

# Two coders, six units, values 0/1, one disagreement (unit 3).
BINARY = np.array([[0, 1, 0, 1, 1, 0], [0, 1, 1, 1, 1, 0]], dtype=float)


def test_alpha_of_binary_data_is_defined():
    # Pairable values: 12; coincidences o00 = 4, o11 = 6, o01 = o10 = 1; n0 = 5, n1 = 7.
    # Nominal alpha = 1 - (n - 1) * D_o / D_e = 1 - 11 * 2 / (2 * 5 * 7) = 1 - 22/70.
    expected = 1 - 22 / 70
    assert krippendorff_alpha(BINARY) == pytest.approx(expected, abs=1e-12)
    assert krippendorff.alpha(reliability_data=BINARY, level_of_measurement="nominal") == pytest.approx(expected)


def test_alpha_of_one_value_only_is_undefined():
    assert math.isnan(krippendorff_alpha(np.ones((2, 4))))


def test_ratio_alpha_refuses_negative_values_and_takes_zero():
    with pytest.raises(ValueError, match="non-negative"):
        krippendorff_alpha([[-1.0, 2.0, 3.0], [1.0, 2.0, 3.0]], level="ratio")
    data = [[0.0, 2.0, 3.0], [1.0, 2.0, 3.0]]
    assert krippendorff_alpha(data, level="ratio") == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="ratio")
    )


def test_a_cell_with_no_decided_match_is_undefined_not_zero():
    resampler = ClusterResampler.draw(3, n_resamples=200, seed=1)
    # Cell 0: wins 2 of 4; cell 1: no decided match at all (0 of 0).
    numerator = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    denominator = np.array([[2.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    result = bootstrap_ratios(
        numerator, denominator, resampler=resampler, null=np.array([0.5, 0.5]), confidence_level=0.95
    )
    assert result.estimate[0] == pytest.approx(0.5)
    assert math.isnan(result.estimate[1])
    assert math.isnan(result.ci_low[1]) and math.isnan(result.ci_high[1]) and math.isnan(result.p_value[1])
    assert result.n_valid[1] == 0


def test_a_p_value_with_every_resample_undefined_is_undefined_not_one():
    replicates = np.full((50, 1), np.nan)
    p, n_valid = two_sided_p(replicates, np.array([0.7]), np.array([0.5]))
    assert n_valid[0] == 0 and math.isnan(p[0])


def test_the_default_confidence_level_is_95_percent():
    resampler = ClusterResampler.draw(6, n_resamples=400, seed=3)
    data = np.array([[0, 1, 0, 1, 1, 0, 2, 2, 1, 0, 1, 2], [0, 1, 1, 1, 1, 0, 2, 1, 1, 0, 1, 2]], dtype=float)
    clusters = np.arange(12) % 6
    default = clustered_alpha(data, clusters, resampler=resampler)
    at_95 = clustered_alpha(data, clusters, resampler=resampler, confidence_level=0.95)
    at_80 = clustered_alpha(data, clusters, resampler=resampler, confidence_level=0.80)
    assert (default.ci_low, default.ci_high) == (at_95.ci_low, at_95.ci_high)
    assert (at_80.ci_high - at_80.ci_low) < (at_95.ci_high - at_95.ci_low)


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [(0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (1.0, 1.0, 1.0), (0.5, 1.0, 2 / 3), (0.2, 0.8, 0.32)],
)
def test_harmonic_mean(x, y, expected):
    assert harmonic_mean(x, y) == pytest.approx(expected, abs=1e-15)
