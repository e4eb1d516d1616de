"""Power planning (analysis.stats.power, manage.py plan_study): the planner's power at its recommended size is
confirmed by a separate simulation that runs each simulated study through the whole analysis, as a report would."""

from __future__ import annotations

import io
import json
import math

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from analysis.models import ResearchJob
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


PLAN = {"effect": 0.5, "sizes": [12, 6], "reps": 40, "resamples": 99, "seed": 3}


@pytest.mark.django_db
def test_a_plan_asked_for_through_the_api_is_the_plan_the_command_makes(
    played_study, researcher_client, django_capture_on_commit_callbacks, tmp_path
):
    """The research page's and API's plan job and `manage.py plan_study` give the same plan for the same
    settings; the dashboard says the recommended size beside the job."""
    with django_capture_on_commit_callbacks(execute=True):
        created = researcher_client.post(
            f"/api/v1/research/studies/{played_study.slug}/jobs/",
            {"kind": "plan", "options": PLAN},
            content_type="application/json",
        )
    assert created.status_code == 201, created.content
    job = researcher_client.get(f"/api/v1/research/jobs/{created.json()['id']}/").json()
    assert job["status"] == "done", job["error"]
    assert job["files"] == ["plan.json", "plan.svg", "plan.txt"]
    served = b"".join(researcher_client.get(f"/research/jobs/{job['id']}/files/plan.json").streaming_content)
    call_command(
        "plan_study", "--effect", "0.5", "--sizes", "6,12", "--reps", "40", "--resamples", "99", "--seed", "3",
        "--out", str(tmp_path), stdout=io.StringIO(),
    )  # fmt: skip
    assert json.loads(served) == json.loads((tmp_path / "plan.json").read_text())
    plan = json.loads(served)
    page = researcher_client.get(f"/research/studies/{played_study.slug}/").content.decode()
    assert "Sample-size plan" in page
    if plan["recommended"] is None:
        assert "No size tried reached power 0.8" in page
    else:
        assert f"Recommended: {plan['recommended']} annotators" in page


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"sizes": [10]}, "effect"),  # the one setting without a default
        ({**PLAN, "effect": "large"}, "effect"),
        ({**PLAN, "effect": 9}, "effect"),
        ({**PLAN, "sizes": [1, 10]}, "sizes"),
        ({**PLAN, "sizes": list(range(10, 140, 10))}, "sizes"),  # 13 sizes
        ({**PLAN, "sizes": "10,20"}, "sizes"),
        ({**PLAN, "target": 1}, "target"),
        ({**PLAN, "alpha": True}, "alpha"),
        ({**PLAN, "reps": 5}, "reps"),
        ({**PLAN, "questions": 2.5}, "questions"),
        ({**PLAN, "taste_sd": -1}, "taste_sd"),
    ],
)
def test_a_plan_the_simulation_could_not_run_is_a_400_naming_the_setting(
    played_study, researcher_client, options, field
):
    response = researcher_client.post(
        f"/api/v1/research/studies/{played_study.slug}/jobs/",
        {"kind": "plan", "options": options},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert field in response.json()["extra"]["fields"], response.json()


@pytest.mark.django_db
def test_the_dashboard_form_plans_and_refuses_a_word_for_a_number(
    played_study, researcher_client, django_capture_on_commit_callbacks
):
    form = {
        "kind": "plan",
        "effect": "\u22120.5",
        "taste_sd": "0.5",
        "questions": "8",
        "sizes": "6, 12",
        "target": "0.8",
    }
    with django_capture_on_commit_callbacks(execute=True):
        researcher_client.post(f"/research/studies/{played_study.slug}/jobs/", {**form, "reps": "20"})
    job = ResearchJob.objects.get(kind="plan")
    assert job.status == "done" and job.options["effect"] == -0.5 and job.options["sizes"] == [6, 12]
    refused = researcher_client.post(f"/research/studies/{played_study.slug}/jobs/", {**form, "effect": "lots"})
    assert "Effect must be a number" in researcher_client.get(refused["Location"]).content.decode()
    assert ResearchJob.objects.count() == 1
