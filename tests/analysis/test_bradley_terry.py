"""Bradley-Terry strengths: MM fit against a statsmodels logit, bootstrap, and SQuALITY's real rankings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

from analysis.stats import (
    AnalysisConfig,
    ClusterResampler,
    analyze,
    bradley_terry,
    prepare_table,
)
from analysis.stats.bradley_terry import fit_mm
from analysis.stats.synthetic import SyntheticStudy, simulate_comparisons
from tests.analysis.helpers import SQUALITY_RESPONSES, row, squality_table, table


def logit_strengths(frame: pd.DataFrame) -> dict[str, float]:
    """Reference MLE: logit of "left won" on +1/-1 system indicators, no intercept, first system fixed at 0."""
    decided = frame[frame["choice"] != "neither"]
    systems = sorted(set(decided["left_system"]) | set(decided["right_system"]))
    x = np.zeros((len(decided), len(systems)))
    for j, s in enumerate(systems):
        x[:, j] = (decided["left_system"] == s).to_numpy() * 1.0 - (decided["right_system"] == s).to_numpy()
    y = (decided["choice"] == "left").to_numpy().astype(float)
    fit = sm.Logit(y, x[:, 1:]).fit(disp=0, tol=1e-12, maxiter=200)
    theta = np.concatenate([[0.0], fit.params])
    theta -= theta.mean()
    return dict(zip(systems, theta, strict=True))


def test_mm_matches_logit_mle():
    frame = simulate_comparisons(SyntheticStudy(n_annotators=30, queries_per_annotator=8, seed=4))
    result = bradley_terry(prepare_table(frame))
    assert result.converged
    for system, theta in logit_strengths(frame).items():
        assert result.get(system).log_strength == pytest.approx(theta, abs=1e-6)


def test_batched_mm_equals_one_at_a_time():
    rng = np.random.default_rng(0)
    batch = rng.integers(1, 20, size=(5, 4, 4)).astype(float)
    batch[:, np.arange(4), np.arange(4)] = 0
    together, _, _ = fit_mm(batch)
    for b in range(5):
        alone, _, _ = fit_mm(batch[b])
        np.testing.assert_allclose(together[b], alone, atol=1e-8)


def _matches(*results: tuple[str, str, str, int]) -> pd.DataFrame:
    """Rows of "annotator: winner beat loser, n times" between systems named by their model."""
    rows = []
    for annotator, winner, loser, n in results:
        for k in range(n):
            rows.append(
                row(
                    annotator,
                    "left",
                    left=(winner, "generic"),
                    right=(loser, "generic"),
                    query_id=f"{annotator}-{winner}-{loser}-{k}",
                )
            )
    return table(rows)


def test_system_that_never_loses_has_infinite_strength_and_the_rest_their_own_fit():
    frame = _matches(
        ("a1", "A", "B", 3), ("a1", "A", "C", 2), ("a2", "A", "D", 2),
        ("a1", "B", "C", 4), ("a2", "C", "B", 2), ("a2", "C", "D", 3), ("a1", "D", "C", 1),
        ("a2", "B", "D", 2), ("a1", "D", "B", 3),
    )  # fmt: skip
    result = bradley_terry(prepare_table(frame))
    a = result.get("A/generic")
    assert a.log_strength == np.inf and a.unbounded == "above" and a.losses == 0
    assert result.separated and result.systems[0].system == "A/generic"
    # B, C, D: the MLE of the matches among themselves (A's matches carry no information about their gaps).
    reference = logit_strengths(frame[frame["left_system"] != "A/generic"])
    for system, theta in reference.items():
        assert result.get(system).log_strength == pytest.approx(theta, abs=1e-6)
        assert result.get(system).unbounded is None
    assert "never lost to the rest" in result.summary() and "+inf" in result.summary()


def test_system_that_never_wins_has_minus_infinite_strength():
    frame = _matches(("a1", "A", "B", 2), ("a2", "B", "A", 1), ("a1", "A", "C", 2), ("a2", "B", "C", 1))
    result = bradley_terry(prepare_table(frame))
    c = result.get("C/generic")
    assert c.log_strength == -np.inf and c.unbounded == "below" and c.strength == 0.0
    assert result.systems[-1].system == "C/generic"
    # A beat B 2 of 3: log-odds log 2 between them, centred on the two.
    assert result.get("A/generic").log_strength == pytest.approx(np.log(2) / 2)


def test_a_group_that_never_loses_to_the_rest_is_unbounded_above():
    frame = _matches(
        ("a1", "A", "B", 1), ("a1", "B", "A", 1),
        ("a1", "C", "D", 2), ("a2", "D", "C", 2), ("a2", "C", "D", 1),
        ("a1", "A", "C", 1), ("a2", "B", "D", 2), ("a2", "A", "D", 1),
    )  # fmt: skip
    result = bradley_terry(prepare_table(frame))
    # {C, D} has more matches inside, so it is the reference; {A, B} never lost to it.
    assert {s.system: s.unbounded for s in result.systems} == {
        "A/generic": "above",
        "B/generic": "above",
        "C/generic": None,
        "D/generic": None,
    }
    # C beat D 3 times of 5: log-odds log(3/2) between them, centred on the two.
    assert result.get("C/generic").log_strength == pytest.approx(np.log(1.5) / 2)
    assert result.get("D/generic").log_strength == pytest.approx(-np.log(1.5) / 2)


def test_two_systems_one_always_winning_are_plus_and_minus_infinity():
    t = table([row(f"a{i}", "left", query_id=f"q{i}") for i in range(4)])
    result = bradley_terry(prepare_table(t))
    assert [(s.system, s.log_strength) for s in result.systems] == [
        ("strong/persona", np.inf),
        ("weak/generic", -np.inf),
    ]
    prior = bradley_terry(prepare_table(t), pseudo_wins=0.5)
    assert not prior.separated and np.isfinite(prior.systems[0].log_strength)
    assert prior.systems[0].system == "strong/persona"


def test_bootstrap_counts_the_resamples_where_a_system_never_lost():
    # A loses only in annotator a0's matches; without a0 in a resample, A never lost there.
    frame = _matches(
        ("a0", "B", "A", 1), ("a0", "A", "B", 1), ("a0", "B", "C", 1), ("a0", "C", "B", 1),
        ("a1", "A", "B", 2), ("a1", "B", "C", 1), ("a1", "C", "B", 1),
        ("a2", "A", "C", 1), ("a2", "C", "B", 2), ("a2", "B", "C", 1),
    )  # fmt: skip
    t = prepare_table(frame)
    assert t.annotators == ("a0", "a1", "a2")
    resampler = ClusterResampler.draw(3, n_resamples=1000, seed=5)
    result = bradley_terry(t, resampler=resampler)
    without_a0 = int((np.bincount(np.flatnonzero(resampler.indices() == 0) // 3, minlength=1000) == 0).sum())
    a = result.get("A/generic")
    assert np.isfinite(a.log_strength) and a.unbounded is None
    assert a.resamples_above == without_a0 and 200 < without_a0 < 400  # about (2/3)^3 of 1000
    assert a.resamples_below == 0
    assert result.n_valid_resamples == 1000 - without_a0 - result.get("B/generic").resamples_below
    assert a.ci_high_infinite == (without_a0 > 25) and a.ci_high == np.inf
    words = a.describe_unbounded(1000)
    assert words == f"never lost: strength unbounded in {without_a0} of 1000 resamples"


def test_infinite_strengths_reach_json_html_and_the_cli(tmp_path, capsys):
    import json

    from analysis.cli import main
    from analysis.report import render_html, report_json

    frame = _matches(("a1", "A", "B", 2), ("a2", "B", "A", 1), ("a1", "A", "C", 2), ("a2", "B", "C", 1))
    report = analyze(frame, config=AnalysisConfig(n_resamples=100))
    data = json.loads(report_json(report))
    c = next(s for s in data["bradley_terry"]["systems"] if s["system"] == "C/generic")
    assert c["log_strength"] is None and c["unbounded"] == "below" and c["resamples_below"] == 100
    assert c["ci_low_infinite"] is True and data["bradley_terry"]["separated"] is True
    html = render_html(report)
    assert "C/generic never beat the rest (−∞)" in html and "−∞" in html
    assert "never won: strength unbounded in 100 of 100 resamples" in html
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    assert main(["--comparisons", str(path), "--out", str(tmp_path / "o"), "--resamples", "100", "--no-export"]) == 0
    out = capsys.readouterr().out
    # A table read from a file carries canonical system ids (docs/comparison-table.md): C/generic is c-generic.
    assert "Bradley-Terry: c-generic: never beat the rest: strength unbounded (-inf)" in out


def test_win_probability_and_intervals():
    frame = simulate_comparisons(SyntheticStudy(n_annotators=40, queries_per_annotator=8, seed=9))
    t = prepare_table(frame)
    result = bradley_terry(t, resampler=ClusterResampler.draw(t.n_annotators, n_resamples=200, seed=1))
    best, worst = result.systems[0], result.systems[-1]
    assert best.system == "strong/persona" and worst.system == "weak/persona"
    assert result.win_probability(best.system, worst.system) > 0.5
    for s in result.systems:
        assert s.ci_low <= s.log_strength <= s.ci_high
    assert result.n_valid_resamples == 200


@pytest.mark.skipif(not SQUALITY_RESPONSES.exists(), reason="shared SQuALITY data not present")
def test_squality_real_rankings():
    frame = squality_table()
    assert frame["annotator"].nunique() == 4
    report = analyze(frame, config=AnalysisConfig(n_resamples=500, seed=3))
    bt = report.bradley_terry
    assert bt is not None
    # Reviewers rank the human-written answers first almost always, and the plain BART model last.
    assert [s.system for s in bt.systems] == ["human/generic", "bart-dpr/generic", "bart/generic"]
    assert bt.get("human/generic").ci_low > bt.get("bart-dpr/generic").ci_high
    h2h = report.win_rates.get("head_to_head", "bart vs human", "round1")
    assert h2h.decided_rate < 0.05 and h2h.p_value < 0.01
    # With four reviewers the clustered interval is wider than a naive binomial one.
    naive_se = np.sqrt(h2h.decided_rate * (1 - h2h.decided_rate) / h2h.decided)
    assert h2h.ci_high - h2h.ci_low >= 2 * 1.96 * naive_se * 0.9
    assert report.regression is None and any("logistic regression skipped" in n for n in report.notes)


def test_the_report_says_never_won_and_plots_the_finite_strengths_with_the_infinite_marked():
    """Issue 33: the table read "0.000 [−∞, −∞]" and the plot was nearly empty when a strength was infinite."""
    import re

    from analysis.report import render_html
    from analysis.report.content import report_content
    from analysis.report.plots import strength_plot

    frame = _matches(("a1", "A", "B", 2), ("a2", "B", "A", 1), ("a1", "A", "C", 2), ("a2", "B", "C", 1))
    report = analyze(frame, config=AnalysisConfig(n_resamples=100))
    html = render_html(report)
    section = html[html.index("Bradley-Terry strengths of systems") :]
    row = re.search(r"<tr><td[^>]*>C/generic</td>(.*?)</tr>", section)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))
    assert cells[0] == "never won against the rest (−∞)"
    assert cells[1] == "none: never won against the rest in most resamples (−∞)"
    assert "[−∞, −∞]" not in section
    strengths = report_content(report).strengths
    assert strengths is not None
    svg = strength_plot(strengths.figure)
    # Both finite systems keep their points and intervals; C is a labelled arrow at the left edge.
    assert "never won: −∞" in svg
    assert svg.count("A/generic") >= 1 and svg.count("B/generic") >= 1
