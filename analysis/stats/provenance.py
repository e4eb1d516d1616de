"""What a report was computed from: row counts, a checksum of the input table, code version, seed, time."""

from __future__ import annotations

import hashlib
import re
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.stats._results import ResultMixin

PACKAGE = "satisfy"


TIMESTAMP_COLUMNS: tuple[str, ...] = ("shown_at", "answered_at")
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def _is_text(series: pd.Series) -> bool:
    return series.dtype == object or str(series.dtype) in ("str", "string", "category")


def _timestamps(series: pd.Series, name: str) -> pd.Series | None:
    """UTC timestamps of a datetime column, or of a text column of ISO 8601 times; else None."""
    if isinstance(series.dtype, pd.DatetimeTZDtype):
        return series.dt.tz_convert("UTC")
    if str(series.dtype).startswith("datetime64"):
        return series.dt.tz_localize("UTC")
    if not _is_text(series):
        return None
    text = series.dropna().astype(str)
    text = text[text != ""]
    if name not in TIMESTAMP_COLUMNS and (text.empty or not text.str.match(_ISO).all()):
        return None
    try:
        return pd.to_datetime(series.replace("", None), utc=True, format="ISO8601")
    except (ValueError, TypeError):
        return None


def _canonical_column(series: pd.Series, name: str) -> tuple[str, np.ndarray, bytes]:
    """(kind, integer codes in sorted order of the values (-1 missing), canonical bytes of the values).

    Kinds: ``null`` (every value missing), ``time`` (UTC nanoseconds), ``number`` (float64: 3 and 3.0
    are one value, -0.0 is 0.0), ``bool`` and ``text``; an empty string counts as missing (CSV cannot
    tell them apart). Text whose every value is a number (an id read back from CSV) counts as a number.
    """
    values = series.reset_index(drop=True)
    if _is_text(values):
        values = values.astype(object).where(values.astype("string").fillna("") != "", None)
    if values.isna().all():
        return "null", np.full(len(values), -1, dtype=np.int64), b""
    stamps = _timestamps(values, name)
    if stamps is not None:
        # Microseconds: what PostgreSQL, Parquet (``coerce_timestamps="us"``) and the JSONL writer keep.
        ns = stamps.astype("datetime64[ns, UTC]").dt.floor("us")
        codes, uniques = pd.factorize(ns, sort=True, use_na_sentinel=True)
        return "time", codes, np.asarray(uniques.asi8, dtype=np.int64).tobytes()
    if values.dtype == bool or str(values.dtype) == "boolean":
        codes, uniques = pd.factorize(values.astype("boolean"), sort=True, use_na_sentinel=True)
        return "bool", codes, "|".join("true" if u else "false" for u in uniques).encode()
    numbers = pd.to_numeric(values, errors="coerce") if _is_text(values) else values
    if pd.api.types.is_numeric_dtype(numbers) and numbers.isna().equals(values.isna()):
        floats = numbers.astype("float64") + 0.0  # -0.0 -> 0.0
        codes, uniques = pd.factorize(floats, sort=True, use_na_sentinel=True)
        return "number", codes, np.asarray(uniques, dtype=np.float64).tobytes()
    text = values.astype("string")
    codes, uniques = pd.factorize(text, sort=True, use_na_sentinel=True)
    return "text", codes, "\x1f".join(str(u) for u in uniques).encode()


def table_checksum(table: pd.DataFrame) -> str:
    """sha256 of a canonical form of the table, so that one table written as CSV, JSONL or Parquet and
    read back gives the same checksum.

    The canonical form: columns sorted by name; each column reduced to its kind (``_canonical_column``:
    timestamps in UTC, to the microsecond, whether typed or ISO text, numbers as float64, text as text, empty text
    as missing) and to integer codes of its sorted distinct values; rows sorted on those codes (so row
    order and the index do not count). The hash covers the column names, kinds, distinct values and the
    sorted code matrix. It is an identity check, not a signature.
    """
    h = hashlib.sha256()
    names = sorted(map(str, table.columns))
    h.update("\x1f".join(names).encode())
    by_name = {str(c): c for c in table.columns}
    columns = [_canonical_column(table[by_name[n]], n) for n in names]
    if not columns:
        return h.hexdigest()
    matrix = np.column_stack([codes.astype(np.int64) for _, codes, _ in columns])
    order = np.lexsort(matrix.T[::-1]) if len(matrix) else np.arange(0)
    for name, (kind, _, uniques) in zip(names, columns, strict=True):
        h.update(b"\x1e" + name.encode() + b"\x1d" + kind.encode() + b"\x1d" + uniques)
    h.update(np.ascontiguousarray(matrix[order]).tobytes())
    return h.hexdigest()


def code_version() -> str:
    """``git describe --always --dirty`` of the checkout holding this module, else the package version."""
    root = Path(__file__).resolve().parents[2]
    try:
        done = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--tags"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        if done.returncode == 0 and done.stdout.strip():
            return f"git:{done.stdout.strip()}"
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        return f"{PACKAGE}=={metadata.version(PACKAGE)}"
    except metadata.PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class Provenance(ResultMixin):
    n_rows: int
    n_decided: int
    n_neither: int
    n_annotators: int
    n_queries: int
    studies: tuple[str, ...]
    columns: tuple[str, ...]
    metrics: tuple[str, ...]
    table_sha256: str
    code_version: str
    seed: int
    n_resamples: int
    created_at: str


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
