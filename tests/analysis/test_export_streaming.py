"""The streamed, vectorised exports against the row-by-row writers they replaced (same values read back)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.exports import ESCAPE, _prepare, _write_jsonl, export_comparisons, neutralize_cell, neutralize_frame
from analysis.stats import table_checksum
from analysis.stats.synthetic import SyntheticStudy, simulate_comparisons


def _row_by_row_jsonl(frame: pd.DataFrame, path: Path) -> None:
    """The former writer: ``json.dumps`` of each row's record (kept here as the reference)."""

    def default(value: object) -> object:
        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.floating):
            return float(value)
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, pd.Timestamp | datetime):
            return value.isoformat()
        raise TypeError(type(value).__name__)

    with path.open("w", encoding="utf-8") as fh:
        chunk = frame.astype(object)
        chunk = chunk.where(chunk.notna(), None)
        for record in chunk.to_dict(orient="records"):
            fh.write(json.dumps(record, ensure_ascii=False, allow_nan=False, default=default) + "\n")


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _same(new: list[dict[str, object]], old: list[dict[str, object]]) -> None:
    assert len(new) == len(old)
    for a, b in zip(new, old, strict=True):
        assert list(a) == list(b)  # key order too
        for key in a:
            # Equal values of equal JSON types: 1.0 stays a float, not the integer 1.
            assert a[key] == b[key] and type(a[key]) is type(b[key]), (key, a[key], b[key])


def test_jsonl_of_awkward_values_reads_back_as_the_row_writer_wrote_them(tmp_path: Path) -> None:
    stamps = pd.Series(
        [
            pd.Timestamp("2026-11-30T10:00:00", tz="UTC"),
            pd.Timestamp("2026-11-30T10:00:00.123456", tz="UTC"),
            pd.NaT,
            pd.Timestamp("1969-07-20T20:17:40.5", tz="UTC"),
        ],
        dtype="datetime64[us, UTC]",
    )
    frame = pd.DataFrame(
        {
            "floats": [0.1, 1.0, -0.0, np.nan],
            "tiny_and_huge": [1e-7, 1e16, 5e-324, 1.7976931348623157e308],
            "digits": [0.30000000000000004, 2.5e15, 123456789.123, 1e22],
            "ints": np.array([1, -2, 2**53 + 1, 0], dtype=np.int64),
            "flags": [True, False, True, False],
            "text": pd.Series(["plain", "日本語 🙂", None, 'quote " and \\ and \n'], dtype="str"),
            "ids": pd.Series(["a", "a", "b", None], dtype="string"),
            "label": pd.Categorical(["x", "y", "x", None]),
            "mixed": pd.Series([1, "1", None, 2.5], dtype=object),
            "nullable": pd.Series([1, None, 3, None], dtype="Int64"),
            "shown_at": stamps,
            "naive": pd.Series(
                pd.to_datetime(["2026-01-01 12:00:00", None, "2026-01-02 00:00:00", "2026-01-03 00:00:01"])
            ),
            "ns": pd.Series(pd.to_datetime(["2026-01-01T00:00:00.000000001Z"] * 4, utc=True)),
            "berlin": pd.Series(pd.date_range("2026-03-29", periods=4, freq="h", tz="Europe/Berlin")),
        }
    )
    new, old = tmp_path / "new.jsonl", tmp_path / "old.jsonl"
    _write_jsonl(frame, new)
    _row_by_row_jsonl(frame, old)
    _same(_lines(new), _lines(old))
    first = _lines(new)[0]
    assert first["shown_at"] == "2026-11-30T10:00:00+00:00" and first["floats"] == 0.1
    assert _lines(new)[1]["shown_at"] == "2026-11-30T10:00:00.123456+00:00"
    assert _lines(new)[3]["floats"] is None and _lines(new)[2]["shown_at"] is None


def test_jsonl_refuses_infinity_as_the_row_writer_did(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        _write_jsonl(pd.DataFrame({"score": [1.0, np.inf]}), tmp_path / "inf.jsonl")


def test_jsonl_of_a_study_table_in_chunks_matches_the_row_writer(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("analysis.exports.JSONL_CHUNK_ROWS", 7)  # several chunks and a short last one
    table = simulate_comparisons(SyntheticStudy(n_annotators=4, queries_per_annotator=2, n_metrics=3, seed=5))
    frame = _prepare(table)
    new, old = tmp_path / "new.jsonl", tmp_path / "old.jsonl"
    _write_jsonl(frame, new)
    _row_by_row_jsonl(frame, old)
    _same(_lines(new), _lines(old))
    assert len(_lines(new)) == len(table) > 14


def test_csv_guard_on_distinct_values_escapes_exactly_the_cells_the_per_cell_rule_escapes() -> None:
    cells = ["=1+1", "plain", "-1.5", "+cmd", None, "'=x", "@a", "=1+1", "＝2", "\tx", "ok", "-", "%"]
    frame = pd.DataFrame({"str": pd.Series(cells, dtype="str"), "obj": pd.Series(cells * 1, dtype=object)})
    safe = neutralize_frame(frame)
    for col in ("str", "obj"):
        got = [None if pd.isna(v) else v for v in safe[col]]
        assert got == [None if c is None else neutralize_cell(c) for c in cells]
    assert safe["str"][0] == ESCAPE + "=1+1" and safe["str"][1] == "plain"


def test_export_manifest_checksum_given_by_the_analysis_equals_the_files_own(tmp_path: Path) -> None:
    table = simulate_comparisons(SyntheticStudy(n_annotators=3, queries_per_annotator=2, n_metrics=2, seed=2))
    given = export_comparisons(table, tmp_path / "given", table_sha256=table_checksum(table))
    computed = export_comparisons(table, tmp_path / "computed")
    assert given.table_sha256 == computed.table_sha256
    assert [f.sha256 for f in given.files if f.format != "parquet"] == [
        f.sha256 for f in computed.files if f.format != "parquet"
    ]
