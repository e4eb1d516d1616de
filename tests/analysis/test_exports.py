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


@pytest.mark.parametrize("value", ["=1+1", "+1", "-1", "@x", "\tx", "\rx"])
def test_formula_cells_are_neutralised_and_restored(value):
    assert neutralize_cell(value) == "'" + value
    assert restore_cell(neutralize_cell(value)) == value
    assert neutralize_cell("plain") == "plain" and neutralize_cell(-1.5) == -1.5


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
