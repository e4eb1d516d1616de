"""Krippendorff's alpha at its edges: binary data, zeros on the ratio scale, undefined cases, the coincidence
matrices per unit and per cluster, and the clustered interval's defaults. Expected values are computed by hand
(Krippendorff 2011's definitions) or by the krippendorff package."""

from __future__ import annotations

import warnings

import krippendorff
import numpy as np
import pytest

from analysis.stats.alpha import (
    alpha_from_cluster_coincidences,
    alpha_from_coincidences,
    cluster_coincidences,
    clustered_alpha,
    distance_matrix,
    krippendorff_alpha,
    unit_coincidences,
    value_domain,
)
from analysis.stats.bootstrap import ClusterResampler

NAN = np.nan
# Two coders, four units: (0, 0), (0, 1), (1, 1), (1, 1).
BINARY = [[0, 0, 1, 1], [0, 1, 1, 1]]


def package(data, level):
    return float(krippendorff.alpha(reliability_data=np.asarray(data, dtype=float), level_of_measurement=level))


def test_alpha_of_binary_data_is_the_hand_computed_number():
    # Coincidences: o_00 = 2, o_01 = o_10 = 1, o_11 = 4; n_0 = 3, n_1 = 5, n = 8.
    # alpha = 1 - (n - 1) * (o_01 + o_10) / (2 n_0 n_1) = 1 - 7 * 2 / 30 = 8 / 15.
    assert krippendorff_alpha(BINARY) == pytest.approx(8 / 15, abs=1e-12)
    assert package(BINARY, "nominal") == pytest.approx(8 / 15, abs=1e-12)
    # Two values are an interval scale too, where the distance is the same for the one pair.
    assert krippendorff_alpha(BINARY, "interval") == pytest.approx(8 / 15, abs=1e-12)


def test_the_default_level_is_nominal():
    data = [[1, 2, 3, 3, 1], [1, 3, 3, 2, 1]]
    assert krippendorff_alpha(data) == krippendorff_alpha(data, "nominal")
    assert krippendorff_alpha(data) == pytest.approx(package(data, "nominal"), abs=1e-12)
    assert krippendorff_alpha(data) != pytest.approx(package(data, "interval"), abs=1e-3)


def test_one_unit_coded_twice_differently_has_alpha_zero():
    # n = 2: o_12 = o_21 = 1, n_1 = n_2 = 1; alpha = 1 - 1 * 2 / 2 = 0 (the package agrees).
    assert krippendorff_alpha([[1], [2]]) == 0.0
    assert package([[1], [2]], "nominal") == 0.0


@pytest.mark.parametrize("level", ["ratio", "interval", "ordinal", "nominal"])
def test_zero_and_one_are_ordinary_values(level):
    # Ratio distance ((c - k) / (c + k))^2 is 1 between 0 and anything else, and 0 between 0 and 0.
    data = [[0, 1, 2, 0, 1, 0], [0, 2, 2, 1, 1, 0]]
    assert krippendorff_alpha(data, level) == pytest.approx(package(data, level), abs=1e-12)
    np.testing.assert_allclose(
        distance_matrix("ratio", np.array([0.0, 1.0, 2.0]), np.ones(3)), [[0, 1, 1], [1, 0, 1 / 9], [1, 1 / 9, 0]]
    )


def test_ratio_level_refuses_negative_values_with_a_message():
    with pytest.raises(ValueError, match=r"^ratio alpha needs non-negative values$"):
        krippendorff_alpha([[-1, 2, 3], [-1, 2, 2]], "ratio")
    # The other levels take negative codes (e.g. -1 / 0 / 1 votes).
    votes = [[-1, 0, 1, 1, -1], [-1, 1, 1, 0, -1]]
    for level in ("nominal", "ordinal", "interval"):
        assert krippendorff_alpha(votes, level) == pytest.approx(package(votes, level), abs=1e-12)


def test_an_unknown_level_and_a_flat_list_are_refused_with_a_message():
    with pytest.raises(ValueError, match=r"^level of measurement must be one of nominal, ordinal, interval, ratio, "):
        krippendorff_alpha(BINARY, "cardinal")
    with pytest.raises(ValueError, match=r"^reliability data must be a coders x units matrix$"):
        krippendorff_alpha([1, 2, 3])


def test_none_counts_as_missing():
    with_none = [[1, 2, None, 3], [1, 2, 2, None], [None, 2, 2, 3]]
    with_nan = [[1, 2, NAN, 3], [1, 2, 2, NAN], [NAN, 2, 2, 3]]
    assert krippendorff_alpha(with_none) == krippendorff_alpha(with_nan)
    assert value_domain(with_none).tolist() == [1.0, 2.0, 3.0]


def test_alpha_does_not_depend_on_the_unit_of_measurement():
    # Interval and ratio alpha are unchanged when every value is scaled (cents for euros), even when the
    # expected disagreement becomes small.
    data = np.array([[1, 2, 3, 3, 2, 1, 4], [1, 2, 3, 2, 2, 1, 4]], dtype=float)
    for level in ("interval", "ratio"):
        assert krippendorff_alpha(data / 100, level) == pytest.approx(krippendorff_alpha(data, level), abs=1e-9)
        assert krippendorff_alpha(data / 100, level) == pytest.approx(package(data / 100, level), abs=1e-9)
    close = [[10, 11, 10, 11], [10, 11, 11, 11]]  # ratio distances of (1/21)^2
    assert krippendorff_alpha(close, "ratio") == pytest.approx(package(close, "ratio"), abs=1e-9)


def test_undefined_alpha_is_nan_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # One value only.
        assert np.isnan(krippendorff_alpha([[1, 1, 1], [1, 1, NAN]], "interval"))
        # Two values present, but the unit with the second is coded once: no expected disagreement.
        for level in ("nominal", "ordinal", "interval", "ratio"):
            assert np.isnan(krippendorff_alpha([[1, 1, 2], [1, 1, NAN]], level))
        # Nothing pairable at all.
        assert np.isnan(krippendorff_alpha([[1, NAN], [NAN, 2]]))
        assert np.isnan(float(alpha_from_coincidences(np.zeros((2, 2)), "nominal", np.array([1.0, 2.0]))))


def test_each_units_coincidences_by_hand():
    # Unit 0: three coders all code 1 -> 6 ordered pairs / (m - 1 = 2) = 3 in o_11.
    # Unit 1: two coders, 1 and 2 -> o_12 = o_21 = 1. Unit 2: coded once, not pairable.
    data = [[1, 1, 2], [1, 2, NAN], [1, NAN, NAN]]
    domain = value_domain(data)
    per_unit = unit_coincidences(data, domain)
    assert per_unit.shape == (3, 2, 2)
    assert per_unit[0].tolist() == [[3, 0], [0, 0]]
    assert per_unit[1].tolist() == [[0, 1], [1, 0]]
    assert per_unit[2].tolist() == [[0, 0], [0, 0]]


def test_coincidences_without_clusters_are_one_matrix_of_all_units():
    data = [[1, 1, 2, 3], [1, 2, 2, NAN], [1, NAN, 2, 3]]
    domain = value_domain(data)
    together = cluster_coincidences(data, domain)
    assert together.shape == (1, 3, 3)
    np.testing.assert_allclose(together[0], unit_coincidences(data, domain).sum(axis=0))
    # Cluster codes read from a float column (pandas) are the same clusters.
    as_floats = cluster_coincidences(data, domain, np.array([0.0, 1.0, 1.0, 0.0]), 2)
    as_ints = cluster_coincidences(data, domain, [0, 1, 1, 0], 2)
    np.testing.assert_array_equal(as_floats, as_ints)
    # Each pairable unit adds its number of coders: units 0 and 3 (3 + 2), units 1 and 2 (2 + 3).
    assert as_ints[0].sum() == 3 + 2 and as_ints[1].sum() == 2 + 3
    assert as_ints[0, 2, 2] == 2 and as_ints[1, 0, 1] == 1


def test_coincidences_of_one_value_and_of_no_value():
    one_value = [[1, 1, NAN], [1, NAN, 1]]
    assert cluster_coincidences(one_value, value_domain(one_value)).tolist() == [[[2.0]]]
    nothing = [[NAN, NAN], [NAN, NAN]]
    assert cluster_coincidences(nothing, value_domain(nothing)).shape == (1, 0, 0)


def test_distance_matrices_follow_the_leading_shape_of_the_margins():
    domain = np.array([1.0, 2.0, 4.0])
    margins = np.array([[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]])
    for level in ("nominal", "ordinal", "interval", "ratio"):
        d2 = distance_matrix(level, domain, margins)
        assert d2.shape == (2, 3, 3), level
        assert d2.dtype == np.float64
    # Ordinal: (sum of margins from rank c to rank k - (n_c + n_k) / 2)^2, per row of margins.
    ordinal = distance_matrix("ordinal", domain, margins)
    assert ordinal[0, 0, 2] == pytest.approx((1 + 2 + 3 - (1 + 3) / 2) ** 2)
    assert ordinal[1, 0, 2] == pytest.approx((2 + 2 + 2 - (2 + 2) / 2) ** 2)
    assert distance_matrix("interval", domain, margins)[1, 0, 2] == 9.0


def reference_replicates(data: np.ndarray, clusters: np.ndarray, resampler: ClusterResampler, level: str):
    out = []
    for draw in resampler.indices():
        keep = np.concatenate([np.flatnonzero(clusters == a) for a in draw])
        out.append(package(data[:, keep], level))
    return np.asarray(out)


@pytest.fixture(scope="module")
def rated():
    rng = np.random.default_rng(5)
    units, annotators = 60, 6
    clusters = np.repeat(np.arange(annotators), units // annotators)
    human = rng.integers(0, 4, units).astype(float)
    metric = np.where(rng.random(units) < 0.6, human, rng.integers(0, 4, units)).astype(float)
    return np.vstack([metric, human]), clusters, ClusterResampler.draw(annotators, n_resamples=60, seed=3)


def test_clustered_alpha_defaults_to_a_95_percent_nominal_interval(rated):
    data, clusters, resampler = rated
    est = clustered_alpha(data, clusters, resampler=resampler)
    assert est.level == "nominal"
    assert est.alpha == pytest.approx(package(data, "nominal"), abs=1e-12)
    low, high = np.percentile(reference_replicates(data, clusters, resampler, "nominal"), [2.5, 97.5])
    assert (est.ci_low, est.ci_high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    assert (est.n_resamples, est.n_valid_resamples) == (60, 60)


@pytest.mark.parametrize("level", ["ordinal", "interval", "ratio"])
def test_clustered_alpha_at_other_levels_resamples_as_the_package_would(rated, level):
    data, clusters, resampler = rated
    est = clustered_alpha(data, list(clusters), resampler=resampler, level=level, confidence_level=0.8)
    assert est.level == level
    assert est.alpha == pytest.approx(package(data, level), abs=1e-12)
    low, high = np.percentile(reference_replicates(data, clusters, resampler, level), [10, 90])
    assert (est.ci_low, est.ci_high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))


def test_clustered_alpha_of_one_value_is_undefined(rated):
    _, clusters, resampler = rated
    same = np.ones((2, clusters.size))
    est = clustered_alpha(same, clusters, resampler=resampler, level="interval")
    assert np.isnan(est.alpha) and np.isnan(est.ci_low) and np.isnan(est.ci_high)
    assert (est.level, est.n_resamples, est.n_valid_resamples) == ("interval", 60, 0)


def test_clustered_alpha_refuses_clusters_of_the_wrong_length(rated):
    data, clusters, resampler = rated
    with pytest.raises(ValueError, match=r"^clusters must give one cluster per unit$"):
        clustered_alpha(data, clusters[:-1], resampler=resampler)
    with pytest.raises(ValueError, match=r"^level of measurement must be one of"):
        clustered_alpha(data, clusters, resampler=resampler, level="cardinal")


def test_clustered_alpha_of_binary_data_with_two_annotators(rated):
    data, clusters, _ = rated
    binary = (data >= 2).astype(float)
    two = np.where(clusters < 3, 0, 1)
    resampler = ClusterResampler.draw(2, n_resamples=40, seed=8)
    est = clustered_alpha(binary, two, resampler=resampler, confidence_level=0.9)
    assert est.alpha == pytest.approx(package(binary, "nominal"), abs=1e-12)
    # Two annotators are enough for an interval.
    low, high = np.percentile(reference_replicates(binary, two, resampler, "nominal"), [5, 95])
    assert (est.ci_low, est.ci_high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))


def test_a_given_domain_with_unseen_values_changes_nothing(rated):
    data, clusters, resampler = rated
    without = clustered_alpha(data, clusters, resampler=resampler, level="ordinal")
    given = clustered_alpha(data, clusters, resampler=resampler, level="ordinal", domain=np.arange(-1.0, 6.0))
    assert (given.alpha, given.ci_low, given.ci_high) == pytest.approx((without.alpha, without.ci_low, without.ci_high))


def test_alpha_from_cluster_coincidences_defaults_to_95_percent(rated):
    data, clusters, resampler = rated
    domain = value_domain(data)
    per_cluster = cluster_coincidences(data, domain, clusters, resampler.n_clusters)
    est = alpha_from_cluster_coincidences(per_cluster, resampler=resampler, level="nominal", domain=domain)
    low, high = np.percentile(reference_replicates(data, clusters, resampler, "nominal"), [2.5, 97.5])
    assert (est.ci_low, est.ci_high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))


def test_one_defined_resample_is_an_interval_of_one_point():
    # Annotator 0 coded one value only (alpha undefined on its own), annotator 1 coded two.
    data = np.array([[1.0, 1.0, 1.0, 2.0], [1.0, 1.0, 1.0, 1.0]])
    clusters = np.array([0, 0, 1, 1])
    weights = np.array([[2.0, 0.0], [0.0, 2.0]])
    resampler = ClusterResampler(n_clusters=2, n_resamples=2, seed=0, weights=weights)
    est = clustered_alpha(data, clusters, resampler=resampler)
    only = package(data[:, [2, 3, 2, 3]], "nominal")
    assert est.n_valid_resamples == 1
    assert est.ci_low == pytest.approx(only) and est.ci_high == pytest.approx(only)
