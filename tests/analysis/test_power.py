"""Power planning (analysis.stats.power, manage.py plan_study): the planner's power at its recommended size is
confirmed by a separate simulation that runs each simulated study through the whole analysis, as a report would."""

from __future__ import annotations

import io
import json
import math

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from analysis.stats import analyze
from analysis.stats.config import AnalysisConfig
from analysis.stats.null_simulation import null_spec
from analysis.stats.power import plan_power, simulate_power
from analysis.stats.synthetic import simulate_comparisons

EFFECT = 0.5


def power_through_analyze(n_annotators: int, *, reps: int, seed: int) -> float:
    """Studies drawn one by one and analysed by ``analyze`` (auto inference), counting p < 0.05 on the
    personalised-vs-generic cell: none of the planner's shortcuts (shared chunks, direct bootstrap calls)."""
    rejected = 0
    for rep in range(reps):
        frame = simulate_comparisons(null_spec(n_annotators, seed=10_000 * seed + rep, effect=EFFECT))
        report = analyze(frame, config=AnalysisConfig(n_resamples=199, seed=rep, threshold_sweep_points=0))
        cell = report.win_rates.get("personalized_vs_generic", "all brackets", "all")
        rejected += math.isfinite(cell.p_value) and cell.p_value < 0.05
    return rejected / reps


def test_the_recommended_size_reaches_the_target_in_a_separate_simulation():
    plan = plan_power([6, 12, 18, 24], effect=EFFECT, target=0.8, reps=200, resamples=299, seed=1)
    assert plan.recommended is not None, plan.summary()
    powers = [p.power for p in plan.points]
    assert powers == sorted(powers) or max(a - b for a, b in zip(powers, powers[1:], strict=False)) < 0.08
    confirmed = power_through_analyze(plan.recommended, reps=120, seed=7)
    # Power at least the target, up to the two simulations' error (about 0.04 and 0.035 at 0.8).
    assert confirmed >= plan.target - 0.1, (plan.summary(), confirmed)
    point = next(p for p in plan.points if p.n_annotators == plan.recommended)
    assert abs(confirmed - point.power) < 0.12, (point.power, confirmed)


def test_without_an_effect_the_rejection_rate_is_the_false_positive_rate():
    point = simulate_power(12, effect=0.0, reps=300, resamples=299, seed=3)
    low, high = point.interval()
    assert low <= 0.05 <= high or point.power < 0.08, point
    assert point.mean_win_rate == pytest.approx(0.5, abs=0.02)


def test_plan_study_prints_the_table_and_writes_the_plan_and_its_plot(tmp_path):
    out = io.StringIO()
    call_command(
        "plan_study", "--effect", "0.5", "--sizes", "6,12", "--reps", "40", "--resamples", "99",
        "--out", str(tmp_path), stdout=out,
    )  # fmt: skip
    text = out.getvalue()
    assert "annotators  power" in text and "cr2-t" in text
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert [p["n_annotators"] for p in plan["points"]] == [6, 12] and plan["effect"] == 0.5
    assert "<svg" in (tmp_path / "plan.svg").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--effect", "0.5", "--sizes", "1,4"], "between 2 and 2000"),
        (["--effect", "0.5", "--sizes", "a,b"], "whole numbers"),
        (["--effect", "0.5", "--target", "1.5"], "target power"),
        (["--effect", "0.5", "--reps", "0"], "--reps"),
    ],
)
def test_plan_study_refuses_bad_options_by_name(args, message):
    with pytest.raises(CommandError, match=message):
        call_command("plan_study", *args, stdout=io.StringIO())
