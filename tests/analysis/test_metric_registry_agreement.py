"""Direction, family and comparability of metrics come from the registry on every path; the default
"neither" threshold follows its documented rule."""

from __future__ import annotations

import io
import json
import statistics

import numpy as np
import pandas as pd
import pytest

from analysis.cli import main
from analysis.services import analysis_config_for
from analysis.stats import AnalysisConfig, analyze, metric_agreement, prepare_table
from analysis.stats.agreement import VOTE_LEFT, VOTE_RIGHT, metric_votes
from analysis.stats.config import DEFAULT_SEED
from analysis.stats.metric_info import describe_metrics
from scoring.core.abstractiveness import risk_code
from tests.analysis.helpers import row, table


def _abstractiveness_table(n: int = 240, seed: int = 5) -> pd.DataFrame:
    """Matches whose two sides have a bigram AR each (and its risk band), RA shared by both sides."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        ar_l, ar_r = rng.gamma(3.0, 0.45, 2)
        ra = float(rng.random())
        p_left = 1 / (1 + np.exp(-(ar_l - ar_r)))
        choice = "neither" if rng.random() < 0.15 else ("left" if rng.random() < p_left else "right")
        rows.append(
            row(
                f"a{i % 12}",
                choice,
                query_id=f"q{i}",
                left__ar_2=float(ar_l),
                right__ar_2=float(ar_r),
                left__ar_risk=float(risk_code(ar_l)),
                right__ar_risk=float(risk_code(ar_r)),
                left__ra_2=ra,
                right__ra_2=ra,
                left__rouge1=float(rng.random()),
                right__rouge1=float(rng.random()),
                left__mystery=float(rng.random()),
                right__mystery=float(rng.random()),
            )
        )
    return table(rows)


def test_registry_facts_of_plain_and_judge_columns():
    info = describe_metrics(["rouge1", "ar_risk", "ra_lcs", "nope", "judge:m@srv:9000:rubric/1:geval_overall"])
    assert (info["rouge1"].family, info["rouge1"].higher_is_better) == ("lexical", True)
    # The risk band is a step function of bigram AR and votes the same way (for more abstraction).
    assert info["ar_risk"].family == "abstractiveness" and info["ar_risk"].higher_is_better is True
    assert info["ra_lcs"].varies_by_side is False
    assert info["nope"].known is False and info["nope"].family == "unassigned"
    judge = info["judge:m@srv:9000:rubric/1:geval_overall"]
    assert (judge.metric, judge.judge, judge.prompt_version) == ("geval_overall", "m@srv:9000", "rubric/1")
    assert judge.family == "llm_judge:m@srv:9000"


def test_ar_and_its_risk_band_never_vote_for_opposite_sides():
    frame = _abstractiveness_table()
    t = prepare_table(frame)
    result = metric_agreement(t, metrics=["ar_2", "ar_risk"], info=describe_metrics(["ar_2", "ar_risk"]))
    votes = {
        m.metric: metric_votes(
            frame[f"left__{m.metric}"],
            frame[f"right__{m.metric}"],
            threshold=m.threshold,
            higher_is_better=m.higher_is_better,
        )
        for m in result.metrics
    }
    opposite = ((votes["ar_2"] == VOTE_LEFT) & (votes["ar_risk"] == VOTE_RIGHT)) | (
        (votes["ar_2"] == VOTE_RIGHT) & (votes["ar_risk"] == VOTE_LEFT)
    )
    assert not opposite.any()
    # Humans here prefer the more abstractive side, so both agree with them in sign.
    assert result.get("ar_2").alpha > 0 and result.get("ar_risk").alpha > 0


def test_file_and_database_paths_give_the_same_agreement(tmp_path):
    frame = _abstractiveness_table()
    path = tmp_path / "comparisons.csv"
    frame.to_csv(path, index=False)
    stdout = io.StringIO()
    status = main(
        ["--comparisons", str(path), "--out", str(tmp_path / "out"), "--resamples", "200", "--no-export"],
        stdout=stdout,
    )
    assert status == 0, stdout.getvalue()
    from_file = json.loads((tmp_path / "out" / "report.json").read_text())["agreement"]
    database = analyze(frame, config=analysis_config_for(frame, seed=DEFAULT_SEED, n_resamples=200))
    assert database.agreement is not None
    by_file = {m["metric"]: m for m in from_file["metrics"]}
    for m in database.agreement.metrics:
        assert by_file[m.metric]["family"] == m.family
        assert by_file[m.metric]["higher_is_better"] == m.higher_is_better
        assert by_file[m.metric]["alpha"] == pytest.approx(m.alpha)
    assert by_file["ar_risk"]["family"] == "abstractiveness"
    # RA cannot differ between the sides: left out with a note, not counted as a vote of "neither".
    assert "ra_2" not in by_file
    assert from_file["excluded"][0]["metric"] == "ra_2"
    printed = stdout.getvalue()
    assert "ra_2 left out: depends only on inputs both sides of a match share" in printed
    assert "metric 'mystery' is not in the metric registry" in printed


def test_default_threshold_is_a_fifth_of_the_pooled_sd():
    scores = {"q1-L": 0.50, "q1-R": 0.52, "q2-L": 0.10, "q2-R": 0.90, "q3-L": 0.40, "q3-R": 0.30}
    choices = ["neither", "right", "left"]
    frame = table(
        [
            row(f"a{i}", c, query_id=q, left__rouge1=scores[f"{q}-L"], right__rouge1=scores[f"{q}-R"])
            for i, (q, c) in enumerate(zip(("q1", "q2", "q3"), choices, strict=True))
        ]
    )
    sd = statistics.stdev(scores.values())  # 0.2604...: each candidate once
    m = metric_agreement(prepare_table(frame), info=describe_metrics(["rouge1"])).get("rouge1")
    assert m.threshold == pytest.approx(0.2 * sd) and m.threshold_rule == "0.2 x pooled SD"
    assert m.pooled_sd == pytest.approx(sd)
    # |0.50 - 0.52| = 0.02 < 0.052: neither; the other two differences are larger.
    assert m.metric_neither == pytest.approx(1 / 3) and m.raw_agreement == pytest.approx(1.0)
    # Overridable: a fixed default, a per-metric value, another fraction.
    fixed = analyze(frame, config=AnalysisConfig(default_metric_threshold=0.0, n_resamples=10)).agreement
    assert fixed is not None and fixed.get("rouge1").metric_neither == 0.0
    half = analyze(frame, config=AnalysisConfig(threshold_sd_fraction=0.5, n_resamples=10)).agreement
    assert half is not None and half.get("rouge1").threshold == pytest.approx(0.5 * sd)


def test_report_shows_thresholds_used_and_the_sweep_plot():
    from analysis.report import render_html

    report = analyze(_abstractiveness_table(), config=AnalysisConfig(n_resamples=50))
    html = render_html(report)
    section = html[html.index("Metric-human agreement") :]
    assert "0.2 x pooled SD" in section and "95% CI" in section
    assert "Left out of agreement: ra_2 (depends only on inputs both sides of a match share" in section
    sweep = section[section.index("Alpha across similarity thresholds") :]
    assert "<svg" in sweep and "pooled standard deviations" in sweep
    # One line per swept metric, 11 points each from 0 to 1 SD (RA is not swept: it is left out).
    assert {s.metric for s in report.threshold_sweeps} == {"ar_2", "ar_risk", "rouge1", "mystery"}
    assert len(report.threshold_sweeps) == 4 * 11
    assert max(s.sd_multiple for s in report.threshold_sweeps) == pytest.approx(1.0)
