"""Comparison-table exports (CSV, JSONL, Parquet), each with a manifest stating what it holds.

Pure functions over a pandas DataFrame and paths: no Django. CSV cells that a spreadsheet would run
as a formula are written with a leading apostrophe (``neutralize_cell`` says which), and
``read_comparisons`` takes it off again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from analysis.stats._results import ResultMixin
from analysis.stats.provenance import TIMESTAMP_COLUMNS, code_version, now_iso, table_checksum
from analysis.stats.systems import canonicalize_systems
from analysis.stats.table import CHOICE_DETAIL_COLUMNS, COLUMNS, design_of, is_stage, metric_names, stage_order
from kernel.spreadsheet import ESCAPE as ESCAPE
from kernel.spreadsheet import FORMULA as _FORMULA
from kernel.spreadsheet import PLAIN_NUMBER as _PLAIN_NUMBER
from kernel.spreadsheet import neutralize_cell as neutralize_cell
from kernel.spreadsheet import restore_cell

MANIFEST_FORMAT = "satisfy.comparison-export/1"
FORMATS = ("csv", "jsonl", "parquet")
JSONL_CHUNK_ROWS = 50_000
TEXT_COLUMNS: tuple[str, ...] = ("query_text", "persona", "left_summary", "right_summary", "source_titles")
"""Participant texts (``analysis.texts``), written only when an export asks for them (``include_texts``):
the question, the persona it was asked with (JSON object), the two summaries shown, and the titles of the
sources in rank order (JSON list)."""
SUMMARY_MANIFEST_FORMAT = "satisfy.summary-export/1"
SUMMARY_COLUMNS: tuple[str, ...] = (
    "candidate",
    "annotator",
    "query_id",
    "query_index",
    "position",
    "system",
    "system_label",
    "model",
    "condition",
    "generation_backend",
    "generation_settings",
    "prompt_template",
    "prompt_template_version",
    "status",
    "failure_reason",
    "finish_reason",
    "truncated",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
    "attempts",
    "regenerations",
    "queued_at",
    "started_at",
    "finished_at",
)
"""The summary table's columns in order (docs/comparison-table.md, "The summary table"); ``summary`` (the
text, ``SUMMARY_TEXT_COLUMNS``) follows only when an export asks for the texts."""
SUMMARY_TEXT_COLUMNS: tuple[str, ...] = ("summary",)
SUMMARY_TIMESTAMP_COLUMNS: tuple[str, ...] = ("queued_at", "started_at", "finished_at")
PAGE_MANIFEST_FORMAT = "satisfy.page-export/1"
PAGE_COLUMNS: tuple[str, ...] = (
    "annotator",
    "page",
    "query_id",
    "query_index",
    "match",
    "shown_at",
    "left_at",
    "seconds_on_page",
)
"""The page-time table's columns (docs/comparison-table.md, "The page-time table"): one row per page an annotator
was shown, ``consent``, ``persona``, ``question``, ``wait`` and ``comparison``, from when it was first shown to
when it was left (sent, or for the waiting page the first comparison shown)."""
PAGE_TIMESTAMP_COLUMNS: tuple[str, ...] = ("shown_at", "left_at")


def ordered_columns(table: pd.DataFrame) -> list[str]:
    """Contract columns first (those present), the choice details, then metric columns, then anything else."""
    cols = [c for c in (*COLUMNS, *CHOICE_DETAIL_COLUMNS) if c in table.columns]
    for m in metric_names(table):
        cols += [f"left__{m}", f"right__{m}"]
    return cols + [str(c) for c in table.columns if c not in cols]


def _text_columns(table: pd.DataFrame) -> list[str]:
    return [
        str(c)
        for c in table.columns
        if table[c].dtype == object or str(table[c].dtype) in ("str", "string", "category")
    ]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class ExportedFile(ResultMixin):
    path: str
    format: str
    rows: int
    bytes: int
    sha256: str


@dataclass(frozen=True)
class ExportManifest(ResultMixin):
    format: str
    study: str | None
    filters: Mapping[str, Any]
    rows: int
    columns: tuple[str, ...]
    stages: Mapping[str, int]
    table_sha256: str
    code_version: str
    seed: int | None
    created_at: str
    files: tuple[ExportedFile, ...]
    includes_texts: bool = False
    exclusion: Mapping[str, Any] | None = None
    """The exclusion rule applied to the table and its counts (``ExclusionSummary.to_dict()``); None: none."""
    design: str | None = None
    """What chose the pairs, from the rows' stages (``analysis.stats.table.design_of``): ``bracket``, ``adaptive``
    (analyse by Bradley-Terry strengths, docs/analysis.md) or ``mixed``; None for a table without stages."""

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n", encoding="utf-8")
        return path


def neutralize_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy whose text cells are safe to open in a spreadsheet (see ``neutralize_cell``), vectorised: the
    rules run on each column's distinct values (ids and labels repeat), then pick the rows."""
    safe = frame.copy()
    for col in _text_columns(safe):
        text = safe[col].astype("string")
        codes, uniques = pd.factorize(text, use_na_sentinel=True)
        if len(uniques) == 0:
            continue
        bare = pd.Series(uniques, dtype="string").str.lstrip(ESCAPE)
        risky_values = (bare.str.match(_FORMULA) & ~bare.str.match(_PLAIN_NUMBER)).fillna(False).to_numpy(dtype=bool)
        if not risky_values.any():
            continue
        risky = (codes >= 0) & risky_values[np.maximum(codes, 0)]
        values = text.to_numpy(dtype=object, na_value=None)
        values[risky] = [ESCAPE + v for v in values[risky]]
        safe[col] = values
    return safe


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    """pyarrow's C++ CSV writer (fast on wide float tables); pandas when a column has mixed types."""
    try:
        table = pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        frame.to_csv(path, index=False, lineterminator="\n")
        return
    pacsv.write_csv(table, path, write_options=pacsv.WriteOptions(quoting_style="needed"))


def _json_value(value: Any) -> Any:
    """What orjson cannot write itself: numpy scalars in object columns, pandas' missing markers, times."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return _finite(float(value))
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, pd.Timestamp | datetime):
        return value.isoformat()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


_JSON_NULL = "null"


def _iso_json(series: pd.Series) -> Any:
    """JSON texts (quoted ISO 8601, or null) of UTC timestamps as ``Timestamp.isoformat()`` writes them
    (a fraction only when there is one, ``+00:00``), vectorised; None when the column needs ``isoformat()``
    itself (naive or other time zones, nanoseconds)."""
    tz = getattr(series.dtype, "tz", None)
    if tz is None or str(tz) != "UTC":
        return None
    values = series.to_numpy(dtype="datetime64[ns]")
    missing = np.isnat(values)
    ns = values.view(np.int64)
    if (ns[~missing] % 1000 != 0).any():
        return None
    whole = ns % 1_000_000_000 == 0
    text = np.where(whole, np.datetime_as_string(values, unit="s"), np.datetime_as_string(values, unit="us"))
    quoted = pc.binary_join_element_wise(pa.scalar('"'), pa.array(text, type=pa.string()), pa.scalar('+00:00"'), "")
    return pc.if_else(pa.array(missing), pa.scalar(_JSON_NULL), quoted)


def _json_texts(series: pd.Series) -> Any:
    """The JSON text of every value of one column, as a pyarrow string array without nulls: what the
    former ``json.dumps`` row writer gave, parsed (floats as the shortest text that reads back exactly,
    with ``.0`` on whole numbers; NaN and missing as null; infinity refused; times as ISO 8601 text)."""
    dtype = series.dtype
    if isinstance(dtype, pd.DatetimeTZDtype) or str(dtype).startswith("datetime64"):
        iso = _iso_json(series)
        if iso is not None:
            return iso
        return pa.array([_JSON_NULL if pd.isna(v) else f'"{v.isoformat()}"' for v in series], type=pa.string())
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        values = series.to_numpy(dtype=np.float64)
        if np.isinf(values).any():
            raise ValueError(f"column {series.name}: out of range float values are not JSON compliant")
        floats = pa.array(values)
        text = pc.cast(floats, pa.string())
        # Arrow writes whole numbers as "3" and -0.0 as "-0": keep them floats ("3.0", "-0.0") as json did.
        if (values == np.trunc(values)).any():
            whole = pc.match_substring_regex(text, r"^-?[0-9]+$")
            text = pc.if_else(whole, pc.binary_join_element_wise(text, ".0", ""), text)
        missing = np.isnan(values)
        if missing.any():
            text = pc.if_else(pa.array(missing), pa.scalar(_JSON_NULL), text)
        return text
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":
        return pc.cast(pa.array(series.to_numpy()), pa.string())
    if isinstance(dtype, np.dtype) and dtype.kind == "b":
        return pc.if_else(pa.array(series.to_numpy()), pa.scalar("true"), pa.scalar("false"))
    if str(dtype) in ("str", "string") or isinstance(dtype, pd.CategoricalDtype):
        # Text columns repeat few values: write each distinct value once, then pick by code.
        codes, uniques = pd.factorize(series, use_na_sentinel=True)
        texts = [orjson.dumps(u, default=_json_value).decode() for u in uniques] + [_JSON_NULL]
        picks = np.where(codes < 0, len(texts) - 1, codes)
        return pc.take(pa.array(texts, type=pa.string()), pa.array(picks))
    return pa.array([orjson.dumps(_plain(v), default=_json_value).decode() for v in series.tolist()], type=pa.string())


def _plain(value: Any) -> Any:
    """A float NaN in an object column is missing (null), as in the former writer."""
    if isinstance(value, float):
        return _finite(value)
    return value


def _finite(value: float) -> float | None:
    if value != value:  # NaN is missing
        return None
    if value in (float("inf"), float("-inf")):
        raise ValueError("Out of range float values are not JSON compliant")
    return value


def _write_jsonl(frame: pd.DataFrame, path: Path) -> None:
    """One JSON object per row: floats as the shortest text that reads back exactly (pandas' writer keeps
    at most 15 digits), missing values and NaN as null, timestamps ISO 8601 in UTC.

    Streamed and vectorised: for each chunk of rows every column becomes an array of JSON texts
    (``_json_texts``: pyarrow's float formatting, orjson for text), and pyarrow joins them row-wise with the
    keys into lines whose bytes are written straight from the array's buffer. A large table is never one
    string, nor a Python object per cell."""
    keys = [orjson.dumps(str(c)).decode() for c in frame.columns]
    with path.open("wb") as fh:
        for start in range(0, len(frame), JSONL_CHUNK_ROWS):
            chunk = frame.iloc[start : start + JSONL_CHUNK_ROWS]
            parts: list[Any] = []
            for i, key in enumerate(keys):
                parts.append(pa.scalar(("{" if i == 0 else ",") + key + ":"))
                parts.append(_json_texts(chunk.iloc[:, i]))
            parts.append(pa.scalar("}\n"))
            lines = pc.binary_join_element_wise(*parts, "").cast(pa.large_string())
            offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64, count=len(lines) + 1, offset=lines.offset * 8)
            fh.write(memoryview(lines.buffers()[2])[int(offsets[0]) : int(offsets[-1])])


def _prepare(
    table: pd.DataFrame, *, timestamps: Sequence[str] = TIMESTAMP_COLUMNS, contract_order: bool = True
) -> pd.DataFrame:
    """Contract order, and timestamps as tz-aware UTC (typed in Parquet). Values are written as given: the
    database and the legacy import already form canonical system ids, and readers fold the rest. A table
    that is not a comparison table (the summary table) keeps its own order."""
    frame = table[ordered_columns(table)].copy() if contract_order else table.copy()
    for col in timestamps:
        if col in frame.columns and not isinstance(frame[col].dtype, pd.DatetimeTZDtype):
            frame[col] = _as_utc(frame[col])
    return frame


def _as_utc(series: pd.Series) -> pd.Series:
    if str(series.dtype).startswith("datetime64"):
        return series.dt.tz_localize("UTC")
    return pd.to_datetime(series.astype(object).where(series.notna(), None), utc=True, format="ISO8601")


def _write_one(frame: pd.DataFrame, path: Path, fmt: str) -> ExportedFile:
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        _write_csv(neutralize_frame(frame), path)
    elif fmt == "jsonl":
        _write_jsonl(frame, path)
    elif fmt == "parquet":
        # Timestamps are tz-aware datetimes by now (_prepare): Parquet stores them as timestamp[us, UTC].
        frame.to_parquet(path, index=False, engine="pyarrow", coerce_timestamps="us", allow_truncated_timestamps=True)
    else:
        raise ValueError(f"unknown export format {fmt!r}; expected one of {', '.join(FORMATS)}")
    return ExportedFile(
        path=path.name, format=fmt, rows=len(frame), bytes=path.stat().st_size, sha256=sha256_file(path)
    )


def _stage_counts(frame: pd.DataFrame) -> dict[str, int]:
    """Rows per stage, first round first and the final last (``{"round1": 2, "final": 1}``)."""
    if "stage" not in frame.columns:
        return {}
    counts = frame["stage"].value_counts()
    stages = [s for s in counts.index if is_stage(s)]
    return {str(s): int(counts[s]) for s in stage_order(stages)}


def _manifest(
    frame: pd.DataFrame,
    files: Sequence[ExportedFile],
    *,
    study: str | None,
    filters: Mapping[str, Any] | None = None,
    seed: int | None = None,
    exclusion: Mapping[str, Any] | None = None,
    table_sha256: str | None = None,
    manifest_format: str = MANIFEST_FORMAT,
    text_columns: Sequence[str] = TEXT_COLUMNS,
) -> ExportManifest:
    if study is None and "study" in frame.columns:
        studies = sorted({str(s) for s in frame["study"].dropna()})
        study = studies[0] if len(studies) == 1 else None
    return ExportManifest(
        format=manifest_format,
        study=study,
        filters=dict(filters or {}),
        rows=len(frame),
        columns=tuple(map(str, frame.columns)),
        stages=_stage_counts(frame),
        design=design_of(frame["stage"].dropna()) if "stage" in frame.columns else None,
        table_sha256=table_sha256 if table_sha256 is not None else table_checksum(frame),
        code_version=code_version(),
        seed=seed,
        created_at=now_iso(),
        files=tuple(files),
        includes_texts=any(c in frame.columns for c in text_columns),
        exclusion=dict(exclusion) if exclusion is not None else None,
    )


def write_comparisons(
    table: pd.DataFrame,
    path: Path,
    *,
    study: str | None = None,
    filters: Mapping[str, Any] | None = None,
    seed: int | None = None,
    exclusion: Mapping[str, Any] | None = None,
) -> ExportManifest:
    """Write one file (format from the suffix: .csv, .jsonl, .parquet) and ``<file>.manifest.json`` beside it."""
    fmt = path.suffix.lstrip(".").lower()
    frame = _prepare(table)
    exported = _write_one(frame, path, fmt)
    manifest = _manifest(frame, [exported], study=study, filters=filters, seed=seed, exclusion=exclusion)
    manifest.write(path.with_name(path.name + ".manifest.json"))
    return manifest


def write_comparisons_csv(table: pd.DataFrame, path: Path, **kwargs: Any) -> ExportManifest:
    return write_comparisons(table, path.with_suffix(".csv"), **kwargs)


def write_comparisons_jsonl(table: pd.DataFrame, path: Path, **kwargs: Any) -> ExportManifest:
    return write_comparisons(table, path.with_suffix(".jsonl"), **kwargs)


def write_comparisons_parquet(table: pd.DataFrame, path: Path, **kwargs: Any) -> ExportManifest:
    return write_comparisons(table, path.with_suffix(".parquet"), **kwargs)


def export_comparisons(
    table: pd.DataFrame,
    out_dir: Path,
    *,
    stem: str = "comparisons",
    formats: Sequence[str] = FORMATS,
    study: str | None = None,
    filters: Mapping[str, Any] | None = None,
    seed: int | None = None,
    exclusion: Mapping[str, Any] | None = None,
    table_sha256: str | None = None,
) -> ExportManifest:
    """Write the table in several formats and one ``<stem>.manifest.json`` listing every file's sha256.

    ``table_sha256``: the table's ``table_checksum`` when the caller has it already (an analysis computes it
    for its provenance; the checksum ignores column order and reads timestamps as UTC, so it is the same
    for the prepared frame); computed here otherwise."""
    frame = _prepare(table)
    return _export_set(
        frame,
        out_dir,
        stem=stem,
        formats=formats,
        study=study,
        filters=filters,
        seed=seed,
        exclusion=exclusion,
        table_sha256=table_sha256,
    )


def _export_set(
    frame: pd.DataFrame, out_dir: Path, *, stem: str, formats: Sequence[str], **manifest: Any
) -> ExportManifest:
    """Each format's file of a prepared frame, and ``<stem>.manifest.json`` (``_manifest``'s keywords) listing them."""
    files = [_write_one(frame, out_dir / f"{stem}.{fmt}", fmt) for fmt in formats]
    result = _manifest(frame, files, **manifest)
    result.write(out_dir / f"{stem}.manifest.json")
    return result


def export_summaries(
    table: pd.DataFrame,
    out_dir: Path,
    *,
    stem: str = "summaries",
    formats: Sequence[str] = FORMATS,
    study: str | None = None,
) -> ExportManifest:
    """Write the summary table (one row per candidate, ``SUMMARY_COLUMNS``) in several formats and one
    ``<stem>.manifest.json``, as ``export_comparisons`` does: every file's sha256, the table's checksum, the
    code version and the study; format marker ``satisfy.summary-export/1``."""
    frame = _prepare(table, timestamps=SUMMARY_TIMESTAMP_COLUMNS, contract_order=False)
    texts = {"manifest_format": SUMMARY_MANIFEST_FORMAT, "text_columns": SUMMARY_TEXT_COLUMNS}
    return _export_set(frame, out_dir, stem=stem, formats=formats, study=study, **texts)


def export_page_times(
    table: pd.DataFrame, out_dir: Path, *, formats: Sequence[str] = FORMATS, study: str | None = None
) -> ExportManifest:
    """Write the page-time table (``PAGE_COLUMNS``) and ``pages.manifest.json``, as ``export_summaries`` does."""
    frame = _prepare(table, timestamps=PAGE_TIMESTAMP_COLUMNS, contract_order=False)
    texts = {"manifest_format": PAGE_MANIFEST_FORMAT, "text_columns": ()}
    return _export_set(frame, out_dir, stem="pages", formats=formats, study=study, **texts)


PARQUET_COLUMNS_PER_READ = 16
"""Columns decoded and handed to pandas at a time when reading Parquet."""


def _read_parquet(path: Path) -> pd.DataFrame:
    """A Parquet table as pandas would read it, a group of columns at a time: only one group's decoding
    buffers are alive at once, Arrow's buffers pass to pandas without a copy (``self_destruct``), and the
    pool's unused memory goes back to the system at the end (at a million rows x 87 columns: peak 1.2 GB
    over the frame's 0.8 GB for one read, 1.0 GB by groups, and a quarter of the CPU time)."""
    convert = {"self_destruct": True, "split_blocks": True}
    file = pq.ParquetFile(path)
    names = file.schema_arrow.names
    index_columns = (file.schema_arrow.pandas_metadata or {}).get("index_columns", [])
    if not names or any(isinstance(c, str) for c in index_columns):
        # An index stored as columns: pandas rebuilds it from the whole table.
        return pd.read_parquet(path, to_pandas_kwargs=convert)
    parts = []
    for start in range(0, len(names), PARQUET_COLUMNS_PER_READ):
        part = file.read(columns=names[start : start + PARQUET_COLUMNS_PER_READ])
        parts.append(part.to_pandas(**convert))
        del part
    frame = parts[0] if len(parts) == 1 else pd.concat(parts, axis=1)
    del parts
    pa.default_memory_pool().release_unused()
    return frame


def read_comparisons(path: Path) -> pd.DataFrame:
    """Read a comparison table written by this module (or any CSV/JSONL/Parquet with the contract's columns).

    System ids are folded to the canonical form (``analysis.stats.systems``) and ``shown_at``/``answered_at``
    become UTC timestamps, whichever format the table came in.
    """
    fmt = path.suffix.lstrip(".").lower()
    if fmt == "csv":
        frame = pd.read_csv(path, keep_default_na=True)
        for col in _text_columns(frame):
            frame[col] = frame[col].astype(object).map(restore_cell)
    elif fmt == "jsonl":
        frame = pd.read_json(path, lines=True, dtype=False, precise_float=True)
    elif fmt == "parquet":
        frame = _read_parquet(path)
    else:
        raise ValueError(f"cannot read {path.name}: expected .csv, .jsonl or .parquet")
    frame = canonicalize_systems(frame)
    for col in TIMESTAMP_COLUMNS:
        if col in frame.columns and not isinstance(frame[col].dtype, pd.DatetimeTZDtype):
            try:
                frame[col] = _as_utc(frame[col])
            except (ValueError, TypeError) as exc:
                raise ValueError(f"{path.name}: column {col} holds values that are not ISO 8601 times ({exc})") from exc
    return frame
