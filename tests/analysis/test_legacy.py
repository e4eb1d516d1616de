"""The paper's platform export: parsing into dataclasses and into the comparison table."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

from analysis.legacy import LegacyFormatError, legacy_comparison_table, parse_legacy_export, pseudonym
from analysis.stats import AnalysisConfig, analyze, prepare_table
from analysis.stats.table import COLUMNS
from tests.analysis.legacy_fixture import MODELS, annotation, make_legacy_zip


def _zip(files: dict[str, object]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, content in files.items():
            zf.writestr(name, content if isinstance(content, str) else json.dumps(content))
    return buf.getvalue()


def test_parses_annotators_annotations_and_personas(tmp_path):
    path = tmp_path / "export.zip"
    make_legacy_zip(path, n_annotators=4, seed=1)
    export = parse_legacy_export(path)
    assert [a.annotator_id for a in export.annotators] == ["1000", "1001", "1002", "1003"]
    first = export.annotators[0]
    assert first.pre_task_answers["role"] == "nurse"
    ann = first.annotations[0]
    assert {c.label for c in ann.candidates} == set("ABCD")
    assert {c.model for c in ann.candidates} == set(MODELS)
    assert sum(c.has_pre_question for c in ann.candidates) == 2
    assert all(p.startswith("W") for p in ann.paper_ids) and len(ann.paper_ids) == 10
    assert export.warnings == ()


def test_comparison_table_follows_the_contract():
    export = parse_legacy_export(make_legacy_zip(n_annotators=5, seed=2))
    frame = legacy_comparison_table(export, study="paper")
    assert list(frame.columns) == [*COLUMNS, "placement_recorded"]
    assert not frame["placement_recorded"].any()
    prepare_table(frame)  # validates choices, stages and winner_side
    n_finals = sum(a.final is not None for x in export.annotators for a in x.annotations)
    assert len(frame) == 2 * export.n_annotations + n_finals
    assert (frame["match"] == "final").sum() == n_finals
    # The raw annotator id never reaches the table.
    assert set(frame["annotator"]) == {pseudonym(a.annotator_id) for a in export.annotators}
    assert not frame["annotator"].str.contains("1000").any()
    persona_rows = frame[frame["left_condition"] == "persona"]
    assert (persona_rows["left_system"].str.endswith("-persona")).all()


def test_one_annotation_to_rows_by_hand():
    raw = {
        "query_index": 3,
        "query": "q",
        "summaries": {k: k for k in "ABCD"},
        "metadata": {
            "A": {"model": "ds", "has_pre_question": True},
            "B": {"model": "ll", "has_pre_question": False},
            "C": {"model": "ds", "has_pre_question": False},
            "D": {"model": "ll", "has_pre_question": True},
        },
        "paper_ids": ["W1"],
        "round1_ab": "B",
        "round1_cd": "C",
        "final": "C",
        "feedback": "",
    }
    export = parse_legacy_export(
        _zip({"users.json": [{"id": "7", "pre_task_answers": {}}], "results/annotator-7.json": [raw]})
    )
    frame = legacy_comparison_table(export)
    ab, cd, final = frame.to_dict(orient="records")
    assert (ab["choice"], ab["winner_system"]) == ("right", "ll-generic")
    assert (cd["choice"], cd["winner_condition"]) == ("left", "generic")
    assert (final["left_position"], final["right_position"], final["choice"]) == ("B", "C", "right")
    assert final["stage"] == "final" and final["round"] == 2 and final["winner_model"] == "ds"


def test_neither_skips_the_final_and_a_stray_final_is_a_warning():
    rng = np.random.default_rng(0)
    raw = annotation(rng, 0)
    raw.update(round1_ab="N", final="A")
    export = parse_legacy_export(_zip({"users.json": [], "results/annotator-x.json": [raw]}))
    frame = legacy_comparison_table(export)
    assert list(frame["match"]) == ["round1_ab", "round1_cd"]
    assert frame.loc[0, "choice"] == "neither" and frame.loc[0, "winner_side"] is None
    assert any("after a 'neither'" in w for w in export.warnings)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"users.json": []}, "no results/annotator-"),
        ({"results/annotator-1.json": "{not json"}, "line 1: not valid JSON"),
        (
            {"results/annotator-1.json": [{"query_index": 0, "metadata": {}, "summaries": {}}]},
            "metadata.A.model is missing",
        ),
    ],
)
def test_malformed_exports_are_clear_errors(files, message):
    with pytest.raises(LegacyFormatError, match=message):
        parse_legacy_export(_zip(files))


def test_bad_choice_and_impossible_final():
    rng = np.random.default_rng(0)
    raw = annotation(rng, 0)
    raw.update(round1_ab="C")
    with pytest.raises(LegacyFormatError, match="round1_ab"):
        parse_legacy_export(_zip({"results/annotator-1.json": [raw]}))
    raw.update(round1_ab="A", round1_cd="D", final="B")
    with pytest.raises(LegacyFormatError, match="final"):
        parse_legacy_export(_zip({"results/annotator-1.json": [raw]}))
    with pytest.raises(LegacyFormatError, match="not a zip"):
        parse_legacy_export(b"plain bytes")


def test_imported_export_analyses_end_to_end():
    frame = legacy_comparison_table(parse_legacy_export(make_legacy_zip(n_annotators=12, seed=3)))
    report = analyze(frame, config=AnalysisConfig(n_resamples=200))
    assert report.regression is not None
    assert report.regression.reference_levels["model_personalized"] == MODELS[0]
    assert report.provenance.n_annotators == 12
    assert report.page_times[0].n == 0  # the legacy export has no timings


def test_position_bias_counts_only_the_rows_whose_placement_was_recorded():
    """A study holding an imported export beside its own comparisons (--into-existing): position bias and
    each annotator's left-win rate come from the placed rows only, counted here by hand."""
    from tests.analysis.helpers import row, table

    placed = ["left", "left", "right", "neither", "left", "right"]  # a1: L L R N, a2: L R
    unplaced = ["left", "left", "left", "left"]  # a1: L L, a3: L L (the legacy rows)
    rows = [row("a1" if i < 4 else "a2", c, query_id=f"p{i}") for i, c in enumerate(placed)]
    rows += [row("a1" if i < 2 else "a3", c, query_id=f"u{i}") for i, c in enumerate(unplaced)]
    frame = table(rows)
    frame["placement_recorded"] = [True] * len(placed) + [False] * len(unplaced)
    report = analyze(frame, config=AnalysisConfig(n_resamples=50))
    left = report.win_rates.get("position", "left", "round1")
    assert (left.n, left.wins, left.losses, left.neither) == (6, 3, 2, 1)
    by = {a.annotator: a for a in report.annotators}
    assert by["a1"].left_win_rate == pytest.approx(2 / 3) and by["a2"].left_win_rate == pytest.approx(1 / 2)
    assert np.isnan(by["a3"].left_win_rate)  # none of a3's rows has a recorded placement
    assert any("not recorded for 4 of 10 comparisons" in n and "only the rows where" in n for n in report.notes)
    # Statistics that do not depend on placement still count every row: the persona side won 7 of 10 by hand.
    persona = report.win_rates.get("variant", "strong / persona", "round1")
    assert (persona.n, persona.wins) == (10, 7)
