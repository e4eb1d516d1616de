"""A later stage's per-variant rate is out of the variant's advances into it (docs/analysis.md, "Win rates"):
its wins in the stage before, the ties there whose coin sent it on (`advanced_side`) and the byes that
brought it there without a match. Tables built and counted by hand."""

from __future__ import annotations

import math

import pytest

from analysis.stats import AnalysisConfig, analyze
from tests.analysis.helpers import row, table

X, Y, Z, W = ("x", "persona"), ("y", "generic"), ("z", "persona"), ("w", "generic")


def _match(annotator, bracket, stage, pair, left, right, choice, advanced=None):
    out = row(annotator, choice, stage=stage, bracket_pair=pair, left=left, right=right, query_id=bracket)
    out["advanced_side"] = advanced if advanced is not None else (choice if choice in ("left", "right") else None)
    if stage == "final":
        out["advanced_side"] = None  # a final sends no one on
    return out


def _rate(report, group, stage):
    return report.win_rates.get("variant", f"{group[0]} / {group[1]}", stage)


def test_a_tie_that_sent_a_variant_on_counts_in_the_next_stage_s_denominator():
    rows = [
        # a1: X and Y tie, the coin sends X on; Z beats W; X beats Z in the final.
        _match("a1", "q1", "round1", "AB", X, Y, "tie", advanced="left"),
        _match("a1", "q1", "round1", "CD", Z, W, "left"),
        _match("a1", "q1", "final", "final", X, Z, "left"),
        # a2: X beats Y; Z and W tie, the coin sends W on; W beats X in the final.
        _match("a2", "q2", "round1", "AB", X, Y, "left"),
        _match("a2", "q2", "round1", "CD", Z, W, "tie", advanced="right"),
        _match("a2", "q2", "final", "final", X, W, "right"),
    ]
    report = analyze(table(rows), config=AnalysisConfig(n_resamples=100, seed=3))
    # By hand: X reached the final twice (a tie's coin, a win) and won it once: 1 of 2.
    x = _rate(report, X, "final")
    assert (x.wins, x.losses, x.n, x.rate) == (1, 1, 2, 0.5)
    # W won no round-1 match but a tie's coin sent it on, and it won the final: 1 of 1 (counting only
    # round-1 wins, it was 1 win out of 0, an undefined rate).
    w = _rate(report, W, "final")
    assert (w.wins, w.n, w.rate) == (1, 1, 1.0)
    # Z won its round-1 match once (a1) and tied without going on once (a2): in the final once, lost it.
    z = _rate(report, Z, "final")
    assert (z.wins, z.losses, z.n, z.rate) == (0, 1, 1, 0.0)
    # Y never went on: no final, an empty denominator.
    y = _rate(report, Y, "final")
    assert (y.wins, y.n) == (0, 0) and math.isnan(y.rate)
    # Every later-stage rate is a share: at most 1.
    later = [r for r in report.win_rates.select("variant") if r.stage == "final" and r.n]
    assert all(r.wins <= r.n for r in later)


def test_a_bye_counts_in_the_next_stage_s_denominator():
    rows = [
        # Three systems, one bracket each: Z has a bye in round 1 and meets the winner of X v Y.
        _match("a1", "q1", "round1", "AB", X, Y, "left"),
        _match("a1", "q1", "final", "final", Z, X, "left"),
        _match("a2", "q2", "round1", "AB", Y, Z, "left"),  # here X has the bye
        _match("a2", "q2", "final", "final", X, Y, "left"),
    ]
    report = analyze(table(rows), config=AnalysisConfig(n_resamples=100, seed=3))
    # Z: one bye into the final (a1), one round-1 loss (a2): reached the final once and won it.
    z = _rate(report, Z, "final")
    assert (z.wins, z.losses, z.n, z.rate) == (1, 0, 1, 1.0)
    # X: a round-1 win (a1) and a bye (a2): two finals, one won.
    x = _rate(report, X, "final")
    assert (x.wins, x.losses, x.n, x.rate) == (1, 1, 2, 0.5)
    # Round 1 counts matches played: X played one (a1), won it.
    assert _rate(report, X, "round1").n == 1


def test_without_a_bracket_column_no_bye_is_inferred():
    rows = [
        _match("a1", "q1", "round1", "AB", X, Y, "left"),
        _match("a1", "q1", "final", "final", Z, X, "left"),
    ]
    frame = table(rows).drop(columns=["bracket_id"])
    report = analyze(frame, config=AnalysisConfig(n_resamples=100, seed=3))
    z = _rate(report, Z, "final")
    assert (z.wins, z.n) == (1, 0) and math.isnan(z.rate)


@pytest.mark.parametrize("choice", ["left", "right"])
def test_without_ties_or_byes_the_denominator_is_the_wins_of_the_stage_before(choice):
    rows = [
        _match("a1", "q1", "round1", "AB", X, Y, choice),
        _match("a1", "q1", "round1", "CD", Z, W, "left"),
        _match("a1", "q1", "final", "final", X if choice == "left" else Y, Z, "right"),
    ]
    report = analyze(table(rows), config=AnalysisConfig(n_resamples=100, seed=3))
    winner = X if choice == "left" else Y
    assert _rate(report, winner, "final").n == 1
    assert _rate(report, Z, "final").n == 1
    assert _rate(report, W, "final").n == 0
