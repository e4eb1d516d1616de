"""One table, three formats: CSV, JSONL and Parquet read back give the checksum the manifest states, and
Parquet keeps the timestamps typed."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.exports import export_comparisons, read_comparisons, write_comparisons
from analysis.stats import table_checksum
from analysis.stats.synthetic import SyntheticStudy, simulate_comparisons
from analysis.stats.systems import canonical_system, system_id


def _database_like(frame: pd.DataFrame) -> pd.DataFrame:
    """The shapes the database selector produces: integer ids, ISO text times, None where unknown."""
    out = frame.copy()
    out["query_id"] = pd.factorize(out["query_id"])[0] + 1000
    out["left_candidate"] = pd.factorize(out["left_candidate"])[0] + 1
    out["right_candidate"] = pd.factorize(out["right_candidate"])[0] + 1
    out["shown_at"] = [None if i % 7 == 0 else t.isoformat() for i, t in enumerate(out["shown_at"])]
    out["answered_at"] = [t.isoformat() for t in out["answered_at"]]
    out["seconds_on_page"] = out["seconds_on_page"].where(out.index % 7 != 0, None)
    out["left__metric_00"] = out["left__metric_00"].where(out.index % 5 != 0, np.nan)
    out["placement_recorded"] = out.index % 3 != 0
    for side in ("left", "right", "winner"):
        out[f"{side}_system"] = [
            None if m is None or m is pd.NA or m != m else system_id(m, c)
            for m, c in zip(out[f"{side}_model"], out[f"{side}_condition"], strict=True)
        ]
    return out


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    frame = simulate_comparisons(SyntheticStudy(n_annotators=5, queries_per_annotator=3, n_metrics=2, seed=4))
    return _database_like(frame)


def test_csv_jsonl_and_parquet_read_back_to_the_manifest_checksum(table, tmp_path):
    manifest = export_comparisons(table, tmp_path)
    stated = json.loads((tmp_path / "comparisons.manifest.json").read_text())["table_sha256"]
    assert stated == manifest.table_sha256 == table_checksum(table)
    sums = {}
    for fmt in ("csv", "jsonl", "parquet"):
        back = read_comparisons(tmp_path / f"comparisons.{fmt}")
        assert len(back) == len(table)
        sums[fmt] = table_checksum(back)
    assert sums == {"csv": stated, "jsonl": stated, "parquet": stated}
    # The checksum still sees content: one changed score, one changed choice.
    back = read_comparisons(tmp_path / "comparisons.parquet")
    changed = back.copy()
    changed.loc[3, "right__metric_01"] += 1e-9
    assert table_checksum(changed) != stated
    # ... and not row order or column order.
    assert table_checksum(back.iloc[::-1][back.columns[::-1]]) == stated


def test_without_canonical_values_the_formats_disagree(table, tmp_path):
    """What the canonical form absorbs: read back raw (pandas' own readers), the formats' checksums differ
    under a per-dtype hash, the old scheme."""
    export_comparisons(table, tmp_path)
    raw = {
        "csv": pd.read_csv(tmp_path / "comparisons.csv"),
        "jsonl": pd.read_json(tmp_path / "comparisons.jsonl", lines=True, dtype=False, precise_float=True),
        "parquet": pd.read_parquet(tmp_path / "comparisons.parquet"),
    }

    def dtype_hash(frame: pd.DataFrame) -> str:
        return str(pd.util.hash_pandas_object(frame, index=False).sum()) + str(list(frame.dtypes.astype(str)))

    assert len({dtype_hash(f) for f in raw.values()}) == 3
    assert len({table_checksum(f) for f in raw.values()}) == 1


def test_parquet_keeps_timestamps_typed(table, tmp_path):
    export_comparisons(table, tmp_path, formats=["parquet"])
    schema = pq.read_schema(tmp_path / "comparisons.parquet")
    for col in ("shown_at", "answered_at"):
        assert pa.types.is_timestamp(schema.field(col).type), schema.field(col).type
        assert schema.field(col).type.tz == "UTC"
    back = pd.read_parquet(tmp_path / "comparisons.parquet")
    first = pd.Timestamp(table.loc[1, "shown_at"])
    assert back.loc[1, "shown_at"] == first and back["shown_at"].isna().sum() == table["shown_at"].isna().sum()


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("DeepSeek-V3.1/persona", "deepseek-v3.1-persona"),
        ("deepseek-v3.1-persona", "deepseek-v3.1-persona"),
        ("Llama 3.3 70B Instruct/generic", "llama-3-3-70b-instruct-generic".replace("3-3", "3.3")),
        ("meta-llama/Llama-3.3-70B", "meta-llama-llama-3.3-70b"),
    ],
)
def test_one_system_one_id(given, canonical):
    assert canonical_system(given) == canonical
    assert canonical_system(canonical) == canonical
    assert system_id("DeepSeek-V3.1", "persona") == canonical_system("DeepSeek-V3.1/persona")
    assert canonical_system(None) is None


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_an_export_without_rows_reads_back_to_its_manifest(table, tmp_path, fmt):
    # An empty JSONL file holds no column names, and an empty bool column (placement_recorded) comes back
    # from CSV as text: both read back to another checksum than the manifest stated for the empty table.
    empty = table.iloc[0:0]
    path = tmp_path / f"comparisons.{fmt}"
    write_comparisons(empty, path)
    manifest = json.loads((tmp_path / f"comparisons.{fmt}.manifest.json").read_text())
    (entry,) = manifest["files"]
    assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest() and entry["rows"] == 0
    back = read_comparisons(path)
    assert len(back) == 0
    assert table_checksum(back) == manifest["table_sha256"]
    assert manifest["rows"] == 0 and "placement_recorded" in manifest["columns"]
    # One row is not "no rows".
    write_comparisons(table.iloc[0:1], tmp_path / f"one.{fmt}")
    one = json.loads((tmp_path / f"one.{fmt}.manifest.json").read_text())["table_sha256"]
    assert one != manifest["table_sha256"] and table_checksum(read_comparisons(tmp_path / f"one.{fmt}")) == one
