"""The single entry point: whole reports, JSON safety, provenance and degenerate tables."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from analysis.stats import AnalysisConfig, AnalysisError, InsufficientDataError, analyze, table_checksum
from analysis.stats.synthetic import SyntheticStudy, lower_is_better_metrics, simulate_comparisons
from tests.analysis.helpers import row, table


@pytest.fixture(scope="module")
def spec() -> SyntheticStudy:
    return SyntheticStudy(n_annotators=30, queries_per_annotator=8, n_metrics=4, lower_is_better_every=4, seed=21)


@pytest.fixture(scope="module")
def report(spec):
    frame = simulate_comparisons(spec)
    config = AnalysisConfig(
        seed=5,
        n_resamples=300,
        higher_is_better=lower_is_better_metrics(spec),
        metric_families={"metric_00": "lexical", "metric_01": "lexical", "metric_02": "judge"},
        metric_thresholds={"metric_02": 0.5},
        threshold_sweep_points=3,
    )
    return frame, analyze(frame, config=config)


def test_report_has_every_section(report):
    frame, r = report
    assert r.regression is not None and r.agreement is not None and r.bradley_terry is not None
    assert {w.statistic for w in r.win_rates.rows} == {
        "variant",
        "model_share",
        "condition_share",
        "head_to_head",
        "personalized_vs_generic",
        "position",
    }
    assert len(r.annotators) == 30
    assert [p.stage for p in r.page_times] == ["all", "round1", "final"]
    assert r.page_times[0].median == pytest.approx(frame["seconds_on_page"].median())
    assert r.agreement.get("metric_02").threshold == 0.5
    assert r.agreement.get("metric_03").higher_is_better is False
    assert {m.family for m in r.agreement.metrics} == {"lexical", "judge", "unassigned"}
    assert len(r.threshold_sweeps) == 4 * 3
    # metric_03's direction is configured, its family is not: the report says what it assumed.
    assert r.notes == (
        "metric 'metric_03' is not in the metric registry: family 'unassigned' assumed "
        "(set metric_families / higher_is_better in the analysis settings to say otherwise)",
    )


def test_variant_final_is_out_of_round1_wins(report):
    frame, r = report
    r1 = r.win_rates.get("variant", "strong / persona", "round1")
    final = r.win_rates.get("variant", "strong / persona", "final")
    assert final.n == r1.wins
    assert final.wins + final.losses + final.neither <= r1.wins


def test_to_dict_is_json_and_states_its_inputs(report):
    frame, r = report
    d = r.to_dict()
    text = json.dumps(d, allow_nan=False)
    assert "NaN" not in text
    prov = d["provenance"]
    assert prov["n_rows"] == len(frame)
    assert prov["table_sha256"] == table_checksum(frame)
    assert prov["seed"] == 5 and prov["n_resamples"] == 300
    assert prov["code_version"] and prov["created_at"].endswith("+00:00")
    assert d["config"]["metric_thresholds"] == {"metric_02": 0.5}
    assert "Win rates" in r.summary()


def test_checksum_tracks_content(report):
    frame, _ = report
    changed = frame.copy()
    changed.loc[0, "choice"] = "neither" if frame.loc[0, "choice"] != "neither" else "left"
    assert table_checksum(changed) != table_checksum(frame)
    assert table_checksum(frame.copy()) == table_checksum(frame)


def test_no_decided_matches_gives_undefined_rates_not_a_crash():
    t = table([row(f"a{i % 2}", "neither", query_id=f"q{i}") for i in range(6)])
    r = analyze(t, config=AnalysisConfig(n_resamples=50))
    assert all(math.isnan(w.decided_rate) and math.isnan(w.p_value) for w in r.win_rates.rows)
    neither = [p for p in r.win_rates.neither if p.group == "all brackets"]
    assert neither and all(p.estimate == 1.0 for p in neither)
    assert r.regression is None and r.bradley_terry is None
    assert any("no decided matches" in n for n in r.notes)
    json.dumps(r.to_dict(), allow_nan=False)


def test_one_annotator_reports_missing_intervals():
    t = table([row("solo", c, query_id=f"q{i}") for i, c in enumerate(["left", "right", "left", "left"])])
    r = analyze(t, config=AnalysisConfig(n_resamples=50))
    cell = r.win_rates.get("position", "left", "round1")
    assert cell.decided_rate == 0.75
    assert math.isnan(cell.ci_low) and math.isnan(cell.p_value)
    assert any("only one annotator" in n for n in r.notes)
    assert any("at least 2 annotators" in n for n in r.notes)


def test_contract_violations_are_clear_errors():
    good = table([row("a", "left"), row("b", "right")])
    with pytest.raises(AnalysisError, match="missing required columns: choice"):
        analyze(good.drop(columns=["choice"]))
    bad = good.copy()
    bad.loc[0, "choice"] = "A"
    with pytest.raises(AnalysisError, match="unknown choice values: A"):
        analyze(bad)
    bad = good.copy()
    bad.loc[0, "winner_side"] = "right"
    with pytest.raises(AnalysisError, match="winner_side disagrees"):
        analyze(bad)
    with pytest.raises(InsufficientDataError, match="no rows"):
        analyze(good.iloc[:0])
    with pytest.raises(ValueError, match="unknown analysis settings: seeed"):
        AnalysisConfig.from_dict({"seeed": 1})


def test_string_and_categorical_dtypes_are_accepted():
    frame = simulate_comparisons(SyntheticStudy(n_annotators=6, queries_per_annotator=4, seed=1))
    as_cat = frame.astype({"annotator": "category", "choice": "category", "left_model": "string"})
    a = analyze(frame, config=AnalysisConfig(n_resamples=50)).win_rates.to_frame()
    b = analyze(as_cat, config=AnalysisConfig(n_resamples=50)).win_rates.to_frame()
    pd.testing.assert_frame_equal(a, b)
