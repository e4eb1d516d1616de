"""Metric votes and Krippendorff's alpha between metrics and annotators."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest

from analysis.stats import (
    alpha_threshold_sweep,
    metric_agreement,
    metric_votes,
    nominal_alpha,
    prepare_table,
)
from analysis.stats.agreement import VOTE_LEFT, VOTE_NEITHER, VOTE_RIGHT, human_votes
from analysis.stats.alpha import clustered_alpha, krippendorff_alpha, unit_coincidences, value_domain
from analysis.stats.bootstrap import ClusterResampler
from tests.analysis.helpers import row, table

NAN = np.nan
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: four observers,
# twelve units, values 1-5, missing data. Published: nominal .743, ordinal .815, interval .849, ratio .797.
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
]


LEVELS = ("nominal", "ordinal", "interval", "ratio")


@pytest.mark.parametrize(
    ("level", "published"), [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)]
)
def test_krippendorff_2011_worked_example(level, published):
    # The project's own implementation, to the paper's three decimals.
    assert round(krippendorff_alpha(KRIPPENDORFF_2011, level), 3) == published


def test_worked_example_coincidences_by_hand():
    # Krippendorff (2011) p. 3: n = 40 pairable values, value 1 coded 9 times, value 3 coded 10 times.
    data = np.asarray(KRIPPENDORFF_2011, dtype=float)
    domain = value_domain(data)
    o = unit_coincidences(data, domain).sum(axis=0)
    assert domain.tolist() == [1, 2, 3, 4, 5]
    assert o.sum() == pytest.approx(40)
    assert o.sum(axis=1).tolist() == pytest.approx([9, 13, 10, 5, 3])
    assert o[0, 0] == pytest.approx(7) and o[1, 2] == pytest.approx(4 / 3)


@pytest.mark.parametrize("level", LEVELS)
def test_own_alpha_matches_the_package_on_random_data(level):
    rng = np.random.default_rng(level.__len__())
    for _ in range(30):
        coders, units, values = int(rng.integers(2, 7)), int(rng.integers(5, 60)), int(rng.integers(3, 9))
        data = rng.integers(1, values + 1, size=(coders, units)).astype(float)
        data[rng.random(data.shape) < 0.25] = np.nan
        expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
        assert abs(krippendorff_alpha(data, level) - expected) < 1e-9


def test_codes_beyond_two_and_undefined_cases():
    # Codes >= 3 (e.g. a 1-5 rubric or the 0-3 risk band) are ordinary values, not an IndexError.
    a = np.asarray([0, 1, 2, 3, 3, 4, 2, 1], dtype=float)
    b = np.asarray([0, 1, 2, 3, 4, 4, 2, 0], dtype=float)
    assert krippendorff_alpha([a, b], "nominal") == pytest.approx(
        krippendorff.alpha(reliability_data=[a, b], level_of_measurement="nominal")
    )
    assert np.isnan(krippendorff_alpha([[1, 1, 1], [1, 1, np.nan]], "interval"))
    with pytest.raises(ValueError, match="level of measurement"):
        krippendorff_alpha([a, b], "cardinal")


def test_annotator_clustered_interval_resamples_annotators():
    rng = np.random.default_rng(3)
    units, annotators = 90, 9
    clusters = np.repeat(np.arange(annotators), units // annotators)
    human = rng.integers(0, 3, units).astype(float)
    metric = np.where(rng.random(units) < 0.6, human, rng.integers(0, 3, units)).astype(float)
    resampler = ClusterResampler.draw(annotators, n_resamples=400, seed=11)
    est = clustered_alpha([metric, human], clusters, resampler=resampler, confidence_level=0.9)
    assert est.alpha == pytest.approx(
        krippendorff.alpha(reliability_data=[metric, human], level_of_measurement="nominal")
    )
    # Reference loop: keep every unit of each drawn annotator, recompute with the package.
    replicates = []
    for draw in resampler.indices():
        keep = np.concatenate([np.flatnonzero(clusters == a) for a in draw])
        replicates.append(
            krippendorff.alpha(reliability_data=[metric[keep], human[keep]], level_of_measurement="nominal")
        )
    low, high = np.percentile(replicates, [5, 95])
    assert est.ci_low == pytest.approx(low) and est.ci_high == pytest.approx(high)
    assert est.ci_low < est.alpha < est.ci_high
    one = clustered_alpha(
        [metric, human], np.zeros(units, dtype=int), resampler=ClusterResampler.draw(1, n_resamples=5, seed=1)
    )
    assert np.isnan(one.ci_low) and np.isnan(one.ci_high)


def test_votes_threshold_and_direction():
    left = [0.5, 0.4, 0.30, np.nan]
    right = [0.4, 0.5, 0.305, 0.1]
    assert metric_votes(left, right).tolist()[:3] == [VOTE_LEFT, VOTE_RIGHT, VOTE_RIGHT]
    assert np.isnan(metric_votes(left, right)[3])
    assert metric_votes(left, right, threshold=0.01).tolist()[:3] == [VOTE_LEFT, VOTE_RIGHT, VOTE_NEITHER]
    # Lower is better (e.g. a hallucination rate): the lower-scoring side gets the vote.
    assert metric_votes(left, right, higher_is_better=False).tolist()[:3] == [VOTE_RIGHT, VOTE_LEFT, VOTE_LEFT]
    with pytest.raises(ValueError):
        metric_votes(left, right, threshold=-1)


def test_nominal_alpha_is_the_package_value():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 3, 200).astype(float)
    b = np.where(rng.random(200) < 0.6, a, rng.integers(0, 3, 200)).astype(float)
    b[:5] = np.nan
    expected = krippendorff.alpha(reliability_data=[a, b], level_of_measurement="nominal")
    assert nominal_alpha(a, b) == pytest.approx(expected)
    assert nominal_alpha(a, a) == pytest.approx(1.0)
    assert np.isnan(nominal_alpha(np.zeros(5), np.zeros(5)))  # no variation: alpha undefined


def _agreement_table():
    rows = []
    choices = ["left", "right", "left", "neither", "right", "left", "right", "left"]
    for i, c in enumerate(choices):
        good_l, good_r = (0.9, 0.1) if c == "left" else ((0.1, 0.9) if c == "right" else (0.5, 0.5))
        rows.append(
            row(
                f"a{i % 3}",
                c,
                query_id=f"q{i}",
                left__agrees=good_l,
                right__agrees=good_r,
                left__errors=good_r,  # lower is better: mirrors the human exactly
                right__errors=good_l,
                left__random=float(i % 2),
                right__random=float((i // 2) % 2),
            )
        )
    return table(rows)


def test_agreement_by_metric_and_family():
    t = prepare_table(_agreement_table())
    result = metric_agreement(
        t,
        families={"agrees": "reference-based", "errors": "reference-based", "random": "llm-judge"},
        higher_is_better={"errors": False},
    )
    assert result.get("agrees").alpha == pytest.approx(1.0)
    assert result.get("errors").alpha == pytest.approx(1.0)
    assert result.get("errors").higher_is_better is False
    human = human_votes(t)
    votes = metric_votes(t.frame["left__random"], t.frame["right__random"])
    expected = krippendorff.alpha(reliability_data=[votes, human], level_of_measurement="nominal")
    assert result.get("random").alpha == pytest.approx(expected)
    fam = {f.family: f for f in result.families}
    assert fam["reference-based"].n_metrics == 2 and fam["reference-based"].mean_alpha == pytest.approx(1.0)
    assert fam["llm-judge"].mean_alpha == pytest.approx(expected)
    assert "reference-based" in result.summary()


def test_inverted_metric_without_direction_disagrees():
    result = metric_agreement(prepare_table(_agreement_table()), metrics=["errors"])
    assert result.get("errors").alpha < 0


def test_threshold_sweep_changes_neither_share():
    t = prepare_table(_agreement_table())
    sweep = alpha_threshold_sweep(t, "agrees", [0.0, 0.5, 1.0])
    assert [s.threshold for s in sweep] == [0.0, 0.5, 1.0]
    assert sweep[0].alpha == pytest.approx(1.0)
    assert sweep[-1].metric_neither == 1.0
    # A metric that always says "neither" only agrees on the one human "neither": worse than chance.
    assert sweep[-1].alpha < 0


def test_threshold_sweep_alpha_is_the_package_value_at_each_threshold():
    t = prepare_table(_agreement_table())
    human = human_votes(t)
    for s in alpha_threshold_sweep(t, "random", [0.0, 0.5, 1.0], higher_is_better=False):
        votes = metric_votes(
            t.frame["left__random"], t.frame["right__random"], threshold=s.threshold, higher_is_better=False
        )
        expected = krippendorff.alpha(reliability_data=[votes, human], level_of_measurement="nominal")
        assert s.alpha == pytest.approx(expected)


def test_a_tie_the_platform_recorded_without_asking_is_no_ones_vote():
    """Identical summaries under the identical policy "tie" are recorded as ties without asking
    (`tie_automatic`); every metric calls identical texts "neither" too. Counted as the annotator's choice,
    those rows raised every metric's agreement with no human judgment behind it: alpha, its unit count and the
    threshold sweep are those of the asked comparisons alone (the krippendorff package on those rows)."""
    base = _agreement_table()
    identical = [row(f"a{i % 3}", "tie", query_id=f"same{i}", left__random=0.5, right__random=0.5) for i in range(6)]
    mixed = table([*base.to_dict("records"), *[r | {"tie_automatic": True} for r in identical]])
    mixed["tie_automatic"] = mixed["tie_automatic"].fillna(False).astype(bool)
    t = prepare_table(mixed)
    result = metric_agreement(t, metrics=["random"])
    asked = prepare_table(base)
    votes = metric_votes(asked.frame["left__random"], asked.frame["right__random"])
    expected = krippendorff.alpha(reliability_data=[votes, human_votes(asked)], level_of_measurement="nominal")
    assert result.get("random").n_units == len(base)
    assert result.get("random").alpha == pytest.approx(expected)
    (swept,) = alpha_threshold_sweep(t, "random", [0.0])
    assert swept.alpha == pytest.approx(expected)
    # The same rows asked of the annotator (a tie they chose) are their votes: agreement counts them.
    chosen = prepare_table(table([*base.to_dict("records"), *identical]))
    assert metric_agreement(chosen, metrics=["random"]).get("random").n_units == len(base) + 6
