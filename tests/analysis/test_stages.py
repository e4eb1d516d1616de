"""Stages of any power-of-two bracket (round1 .. final) through the table contract, the win rates, the
report and the exports, on hand-built tables whose expected counts are worked out below by hand."""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import replace

import pandas as pd
import pytest

from analysis.exports import export_comparisons, read_comparisons
from analysis.report import render_html
from analysis.stats import AnalysisConfig, AnalysisError, analyze, prepare_table, with_derived_columns
from analysis.stats.table import stage_name, stage_order

P, G = "persona", "generic"


def _match(
    annotator: str, query: str, stage: str, pair: str, left: tuple[str, str], right: tuple[str, str], choice: str
):
    label = "final" if stage == "final" else f"{stage}_{pair.lower()}"
    return {
        "study": "shapes",
        "annotator": annotator,
        "query_id": query,
        "query_index": 1,
        "bracket_id": f"b-{query}",
        "match": label,
        "stage": stage,
        "bracket_pair": pair,
        "left_system": f"{left[0]}/{left[1]}",
        "right_system": f"{right[0]}/{right[1]}",
        "left_model": left[0],
        "right_model": right[0],
        "left_condition": left[1],
        "right_condition": right[1],
        "choice": choice,
        "seconds_on_page": 60.0,
    }


def eight_system_table() -> pd.DataFrame:
    """Two brackets of eight systems (models m1..m4 crossed with the two conditions).

    Annotator a1: AB m1/p beats m1/g; CD m2/g beats m2/p; EF m3/p beats m3/g; GH "neither", so EFGH and
    the final are skipped; ABCD m1/p beats m2/g. Annotator a2: AB m1/g; CD m2/p; EF m3/p; GH m4/p;
    ABCD m2/p beats m1/g; EFGH m3/p beats m4/p; final m3/p beats m2/p. 8 + 3 + 1 rows.
    """
    m = _match
    return pd.DataFrame(
        [
            m("a1", "q1", "round1", "AB", ("m1", P), ("m1", G), "left"),
            m("a1", "q1", "round1", "CD", ("m2", P), ("m2", G), "right"),
            m("a1", "q1", "round1", "EF", ("m3", P), ("m3", G), "left"),
            m("a1", "q1", "round1", "GH", ("m4", P), ("m4", G), "neither"),
            m("a1", "q1", "round2", "ABCD", ("m1", P), ("m2", G), "left"),
            m("a2", "q2", "round1", "AB", ("m1", P), ("m1", G), "right"),
            m("a2", "q2", "round1", "CD", ("m2", P), ("m2", G), "left"),
            m("a2", "q2", "round1", "EF", ("m3", G), ("m3", P), "right"),
            m("a2", "q2", "round1", "GH", ("m4", P), ("m4", G), "left"),
            m("a2", "q2", "round2", "ABCD", ("m1", G), ("m2", P), "right"),
            m("a2", "q2", "round2", "EFGH", ("m3", P), ("m4", P), "left"),
            m("a2", "q2", "final", "final", ("m2", P), ("m3", P), "right"),
        ]
    )


def two_system_table() -> pd.DataFrame:
    """Three 2-system brackets: the final is the only match. Persona wins once, loses once, one "neither"."""
    m = _match
    return pd.DataFrame(
        [
            m("a1", "q1", "final", "final", ("m1", P), ("m1", G), "left"),
            m("a2", "q2", "final", "final", ("m1", G), ("m1", P), "left"),
            m("a3", "q3", "final", "final", ("m1", P), ("m1", G), "neither"),
        ]
    )


CONFIG = AnalysisConfig(seed=3, n_resamples=200)


def _counts(report, group: str, stage: str) -> tuple[int, int, int, int]:
    r = report.win_rates.get("variant", group, stage)
    return r.wins, r.losses, r.neither, r.n


def test_stage_names_of_every_bracket_size():
    assert [stage_name(r, 1) for r in (1,)] == ["final"]
    assert [stage_name(r, 2) for r in (1, 2)] == ["round1", "final"]
    assert [stage_name(r, 3) for r in (1, 2, 3)] == ["round1", "round2", "final"]
    assert [stage_name(r, 4) for r in (1, 2, 3, 4)] == ["round1", "round2", "round3", "final"]
    assert stage_order(["final", "round10", "round2", "round1", None]) == ("round1", "round2", "round10", "final")


def test_eight_systems_analyse_with_three_stages():
    report = analyze(with_derived_columns(eight_system_table()), config=CONFIG)
    assert [(s.stage, s.matches, s.decided, s.neither) for s in report.stages] == [
        ("round1", 8, 7, 1),
        ("round2", 3, 3, 0),
        ("final", 1, 1, 0),
    ]
    # m3/persona: won both first rounds; round2 out of those 2 wins (it played one, won it); final out of
    # its 1 round-2 win, won.
    assert _counts(report, "m3 / persona", "round1") == (2, 0, 0, 2)
    assert _counts(report, "m3 / persona", "round2") == (1, 0, 0, 2)
    assert _counts(report, "m3 / persona", "final") == (1, 0, 0, 1)
    # m1/persona: 1 of 2 first rounds; won its one round2; its final (a1's) was skipped.
    assert _counts(report, "m1 / persona", "round1") == (1, 1, 0, 2)
    assert _counts(report, "m1 / persona", "round2") == (1, 0, 0, 1)
    assert _counts(report, "m1 / persona", "final") == (0, 0, 0, 1)
    # m2/persona lost the final it reached.
    assert _counts(report, "m2 / persona", "final") == (0, 1, 0, 1)
    assert _counts(report, "m4 / persona", "round1") == (1, 0, 1, 2)
    stages_of = {r.stage for r in report.win_rates.select("position")}
    assert stages_of == {"round1", "round2", "final", "all"}
    pairs = [r.group for r in report.win_rates.select("personalized_vs_generic") if r.group.startswith("bracket")]
    assert pairs == [f"bracket {p}" for p in ("AB", "CD", "EF", "GH", "ABCD", "EFGH", "final")]
    # ABCD: a1 m1/p beat m2/g, a2 m2/p beat m1/g: persona 2 of 2 mixed matches.
    abcd = report.win_rates.get("personalized_vs_generic", "bracket ABCD", "ABCD")
    assert (abcd.wins, abcd.n) == (2, 2)
    assert [p.stage for p in report.page_times] == ["all", "round1", "round2", "final"]
    # Two annotators and 12 rows: some level always or never wins (the outcome is separated), so the
    # small-sample logit (the default below 40 annotators) is refused with its reason ...
    assert report.regression is None and any("perfect separation" in n for n in report.notes)
    # ... while the design still has a level per stage: the standard logit (CR1) fits it, with a warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # an unbounded interval is a value, not numpy's overflow
        standard = analyze(with_derived_columns(eight_system_table()), config=replace(CONFIG, inference="standard"))
    assert standard.regression is not None
    assert set(standard.regression.to_frame()["term"].str.contains("round2")) == {True, False}
    assert any(math.isinf(c.ci_high) for c in standard.regression.coefficients)
    assert any("separation" in n for n in standard.regression.notes)


def test_round_is_derived_from_the_stages():
    derived = with_derived_columns(eight_system_table())
    assert dict(zip(derived["stage"], derived["round"], strict=True)) == {"round1": 1, "round2": 2, "final": 3}
    four = with_derived_columns(two_system_table().assign(stage=["round1", "round1", "final"]))
    assert list(four["round"]) == [1, 1, 2]


def test_two_systems_have_per_variant_rates_from_the_final():
    report = analyze(with_derived_columns(two_system_table()), config=CONFIG)
    assert [s.stage for s in report.stages] == ["final"]
    assert _counts(report, "m1 / persona", "final") == (1, 1, 1, 3)
    assert _counts(report, "m1 / generic", "final") == (1, 1, 1, 3)
    assert {r.stage for r in report.win_rates.rows if r.statistic == "position"} == {"final"}
    assert "bracket size" not in " ".join(report.notes)


def test_unknown_stage_names_what_is_allowed():
    frame = eight_system_table()
    frame.loc[0, "stage"] = "semifinal"
    with pytest.raises(AnalysisError, match=r"semifinal.*round1, round2, \.\.\., final or adaptive"):
        prepare_table(frame)
    frame.loc[0, "stage"] = "round0"
    with pytest.raises(AnalysisError, match="round0"):
        prepare_table(frame)


def test_mixed_bracket_sizes_are_noted():
    two = two_system_table().assign(round=1)  # a 2-system bracket's final is its round 1
    four = pd.DataFrame(
        [
            _match("a9", "q9", "round1", "AB", ("m1", P), ("m1", G), "left") | {"round": 1},
            _match("a9", "q9", "round1", "CD", ("m2", P), ("m2", G), "left") | {"round": 1},
            _match("a9", "q9", "final", "final", ("m1", P), ("m2", P), "left") | {"round": 2},
        ]
    )
    report = analyze(pd.concat([two, four], ignore_index=True), config=CONFIG)
    assert any("mixes bracket sizes (2, 4 systems)" in n for n in report.notes)
    alone = analyze(four.assign(annotator=["a8", "a9", "a9"]), config=CONFIG)
    assert not any("mixes bracket sizes" in n for n in alone.notes)


def test_report_and_exports_carry_every_stage(tmp_path):
    frame = with_derived_columns(eight_system_table())
    report = analyze(frame, config=CONFIG)
    html = render_html(report)
    assert "<h2>Stages</h2>" in html
    assert "round1, round2, final" in html
    manifest = export_comparisons(frame, tmp_path, formats=("csv", "parquet"))
    assert dict(manifest.stages) == {"round1": 8, "round2": 3, "final": 1}
    written = json.loads((tmp_path / "comparisons.manifest.json").read_text())
    assert list(written["stages"]) == ["round1", "round2", "final"]
    for name in ("comparisons.csv", "comparisons.parquet"):
        again = analyze(read_comparisons(tmp_path / name), config=CONFIG)
        assert _counts(again, "m3 / persona", "round2") == (1, 0, 0, 2)
