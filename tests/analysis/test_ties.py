"""Ties ("both equally good") in the statistics and the exports, against a table counted by hand.

The rule (docs/comparison-table.md): a tie is nobody's win. Like "neither" it is left out of the decided
win rates, the regression and Bradley-Terry; a rate over all of a variant's matches counts it as a match
not won; the analysis counts ties on their own and says so in a note.
"""

from __future__ import annotations

import numpy as np
import pytest

from analysis.exports import FORMATS, export_comparisons, read_comparisons
from analysis.stats import AnalysisConfig, AnalysisError, analyze, bradley_terry, personalization_frame, prepare_table
from tests.analysis.helpers import row, table

# Strong/persona is always on the left, weak/generic on the right.
CHOICES = {
    "a1": ["left", "tie", "right"],
    "a2": ["left", "tie"],
    "a3": ["left", "neither", "tie"],
}


def _table():
    rows = [
        row(annotator, choice, query_id=f"{annotator}-{i}")
        for annotator, choices in CHOICES.items()
        for i, choice in enumerate(choices)
    ]
    return table(rows)


def test_ties_are_left_out_of_decided_statistics_and_counted_on_their_own():
    # By hand: 8 matches; strong/persona won 3, lost 1; 1 neither, 3 ties.
    report = analyze(_table(), config=AnalysisConfig(n_resamples=200, seed=1))
    strong = report.win_rates.get("variant", "strong / persona", "round1")
    assert (strong.wins, strong.losses, strong.neither, strong.n) == (3, 1, 1, 8)
    assert strong.decided_rate == pytest.approx(3 / 4)
    assert strong.rate == pytest.approx(3 / 8)  # a tie is a match not won
    p = report.provenance
    assert (p.n_rows, p.n_decided, p.n_neither, p.n_tie) == (8, 4, 1, 3)
    assert "1 neither, 3 tie" in report.summary()
    assert any("3 ties (both equally good) are left out" in note for note in report.notes)
    t = prepare_table(_table())
    assert int(t.tie.sum()) == 3 and not (t.tie & t.decided).any()
    assert bradley_terry(t).n_comparisons == 4
    frame = personalization_frame(t)
    assert len(frame) == 4 and frame["personalized_won"].tolist() == [1, 0, 1, 1]


def test_the_decided_statistics_are_those_of_the_table_without_its_ties():
    with_ties = analyze(_table(), config=AnalysisConfig(n_resamples=200, seed=1))
    rows = [
        row(annotator, choice, query_id=f"{annotator}-{i}")
        for annotator, choices in CHOICES.items()
        for i, choice in enumerate(choices)
        if choice != "tie"
    ]
    without = analyze(table(rows), config=AnalysisConfig(n_resamples=200, seed=1))
    a = with_ties.win_rates.get("variant", "strong / persona", "round1")
    b = without.win_rates.get("variant", "strong / persona", "round1")
    assert a.decided_rate == b.decided_rate == pytest.approx(0.75)
    assert b.rate == pytest.approx(3 / 5)


def test_a_tie_claiming_a_winning_side_is_refused():
    bad = _table()
    bad.loc[bad["choice"] == "tie", "winner_side"] = "left"
    with pytest.raises(AnalysisError, match="winner_side disagrees"):
        prepare_table(bad)


@pytest.mark.parametrize("fmt", FORMATS)
def test_exports_carry_the_tie_the_flag_and_the_comments(tmp_path, fmt):
    frame = _table()
    frame["advanced_side"] = np.where(frame["choice"] == "right", "right", "left")
    frame["tie_automatic"] = frame["choice"].eq("tie") & frame["annotator"].eq("a3")
    frame["identical"] = np.where(frame["tie_automatic"], "exact", None)
    frame["similarity"] = np.where(frame["tie_automatic"], 100.0, 41.5)
    frame["comment"] = [None, "Both fine", "=HYPERLINK(1)", None, None, None, "Same text", None]
    export_comparisons(frame, tmp_path, formats=(fmt,))
    back = read_comparisons(tmp_path / f"comparisons.{fmt}")
    cols = list(back.columns)
    # The choice details follow the fixed columns, before anything else.
    assert cols.index("seconds_on_page") < cols.index("advanced_side") < cols.index("comment")
    assert back["choice"].tolist() == frame["choice"].tolist()
    assert back["comment"].where(back["comment"].notna(), None).tolist() == frame["comment"].tolist()
    assert back.loc[back["tie_automatic"].astype(bool), "identical"].tolist() == ["exact"]
    assert analyze(back, config=AnalysisConfig(n_resamples=50, seed=1)).provenance.n_tie == 3
