"""CSV/JSONL/Parquet exports with manifests, and the spreadsheet formula guard."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest

from analysis.exports import (
    export_comparisons,
    neutralize_cell,
    read_comparisons,
    restore_cell,
    write_comparisons_csv,
)
from analysis.stats import AnalysisConfig, analyze, table_checksum
from analysis.stats.synthetic import SyntheticStudy, simulate_comparisons
from analysis.stats.systems import canonical_system


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    f = simulate_comparisons(SyntheticStudy(n_annotators=6, queries_per_annotator=4, n_metrics=2, seed=2))
    f.loc[0, "left_system"] = '=HYPERLINK("http://evil")'
    f.loc[1, "right_system"] = "@SUM(A1)"
    f.loc[2, "query_id"] = "\tq"
    return f


HOSTILE = [
    "=1+1",
    "+1 vote",
    "-based",
    "@SUM(A1)",
    "\tx",
    "\rx",
    "|cmd",
    "%0A",
    ' =HYPERLINK("http://evil")',  # a leading space: spreadsheets trim it and run the rest
    "\u3000=1+1",  # an ideographic space
    "\uff1d1+1",  # ＝ full-width equals sign
    "\uff0bcmd",  # ＋
    "\uff0d2+3",  # －
    "\uff20SUM(A1)",  # ＠
]


@pytest.mark.parametrize("value", HOSTILE)
def test_formula_cells_are_neutralised_and_restored(value):
    assert neutralize_cell(value) == "'" + value
    assert restore_cell(neutralize_cell(value)) == value
    assert neutralize_cell("plain") == "plain" and neutralize_cell(-1.5) == -1.5


def test_the_guard_escapes_at_least_what_defusedcsv_escapes():
    import io

    import defusedcsv.csv as defused

    samples = ["=1", "+1", "-1", "-1.5", "-", "@x", "|x", "%x", "1-2", "a=b", "-1,000.5", "+", "12", "x@y.org"]
    buffer = io.StringIO()
    defused.writer(buffer).writerow(samples)
    # defusedcsv also writes a pipe as "\|"; ours keeps the text and relies on the apostrophe alone.
    reference = [cell.startswith("'") for cell in buffer.getvalue().rstrip("\r\n").split(",", len(samples) - 1)]
    ours = [neutralize_cell(value).startswith("'") for value in samples]
    assert ours[:10] == reference[:10]
    assert ours == [True, True, False, False, True, True, True, True, False, False, False, True, False, False]


def test_hostile_cells_are_inert_in_the_file_and_genuine_values_read_back_unchanged(tmp_path):
    genuine = ["-based", "+1 vote", "name@example.org", "@team", "'quoted'", "'=x", "''=y", "- a list item", "-0.5"]
    table = simulate_comparisons(SyntheticStudy(n_annotators=4, queries_per_annotator=3, n_metrics=1, seed=5))
    table = table.head(len(HOSTILE) + len(genuine)).copy()
    table["query_text"] = HOSTILE + genuine
    metric = next(c for c in table.columns if c.startswith("left__"))
    table.loc[table.index[0], metric] = -1.25  # a negative score, a number in a number column
    write_comparisons_csv(table, tmp_path / "c.csv")

    raw = pd.read_csv(tmp_path / "c.csv", dtype=str, keep_default_na=False)
    for cell in raw["query_text"]:
        # What a spreadsheet sees: text after an apostrophe, a plain number, or nothing it would run.
        assert (
            cell.startswith("'")
            or cell == "-0.5"
            or not cell.lstrip().startswith(tuple("=+-@|%\uff1d\uff0b\uff0d\uff20\t\r"))
        ), cell
    assert raw.loc[0, metric] == "-1.25"

    back = read_comparisons(tmp_path / "c.csv")
    assert list(back["query_text"]) == HOSTILE + genuine
    assert back[metric].dtype.kind == "f" and back.loc[0, metric] == -1.25


def test_csv_has_no_live_formulas(frame, tmp_path):
    write_comparisons_csv(frame, tmp_path / "c.csv")
    raw = pd.read_csv(tmp_path / "c.csv", dtype=str, keep_default_na=False)
    for col in raw.columns:
        if col.startswith(("left__", "right__")) or col in ("seconds_on_page", "query_index", "round"):
            continue
        assert not raw[col].str.match(r"^[=+\-@\t\r]").any(), col
    assert raw.loc[0, "left_system"].startswith("'=")


def test_all_formats_round_trip_to_the_same_analysis(frame, tmp_path):
    manifest = export_comparisons(frame, tmp_path, study="s1", filters={"stage": "all"}, seed=9)
    data = json.loads((tmp_path / "comparisons.manifest.json").read_text())
    assert data["study"] == "s1" and data["filters"] == {"stage": "all"} and data["seed"] == 9
    assert data["rows"] == len(frame) and data["code_version"] and data["created_at"]
    assert data["table_sha256"] == table_checksum(frame[list(data["columns"])])
    for f in manifest.files:
        body = (tmp_path / f.path).read_bytes()
        assert hashlib.sha256(body).hexdigest() == f.sha256
        assert f.rows == len(frame)
    config = AnalysisConfig(n_resamples=50, seed=1)
    reference = analyze(frame, config=config).win_rates.to_frame()
    for fmt in ("csv", "jsonl", "parquet"):
        back = read_comparisons(tmp_path / f"comparisons.{fmt}")
        # Read back through the formula guard, then folded to the canonical system id like every id read.
        assert back.loc[0, "left_system"] == canonical_system(frame.loc[0, "left_system"])
        pd.testing.assert_frame_equal(analyze(back, config=config).win_rates.to_frame(), reference)


def test_single_file_writer_writes_its_manifest(frame, tmp_path):
    write_comparisons_csv(frame, tmp_path / "x.csv", study="s")
    manifest = json.loads((tmp_path / "x.csv.manifest.json").read_text())
    assert manifest["files"][0]["path"] == "x.csv"
    with pytest.raises(ValueError, match="unknown export format"):
        from analysis.exports import write_comparisons

        write_comparisons(frame, tmp_path / "x.xlsx")
