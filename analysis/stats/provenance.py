"""What a report was computed from: row counts, a checksum of the input table, code version, seed, time."""

from __future__ import annotations

import hashlib
import re
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from analysis.stats._results import ResultMixin

PACKAGE = "satisfy"


TIMESTAMP_COLUMNS: tuple[str, ...] = ("shown_at", "answered_at")
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def _is_text(series: pd.Series) -> bool:
    return series.dtype == object or str(series.dtype) in ("str", "string", "category")


def _utc_ns(values: pd.Series | pd.Index) -> npt.NDArray[np.int64]:
    """UTC microseconds (as nanoseconds) of timestamps: what PostgreSQL, Parquet and the JSONL writer keep."""
    stamps = pd.to_datetime(values, utc=True, format="ISO8601")
    return np.asarray(pd.DatetimeIndex(stamps).floor("us").as_unit("ns").asi8, dtype=np.int64)


def _sorted_codes(codes: npt.NDArray[np.int64], keys: Any) -> tuple[npt.NDArray[np.int64], Any]:
    """Re-code ``codes`` (indices into ``keys``, -1 missing) by the sorted distinct ``keys``."""
    inverse, distinct = pd.factorize(pd.Index(keys), sort=True)
    remap = np.append(np.asarray(inverse, dtype=np.int64), -1)
    return remap[codes], np.asarray(distinct)


_NUMBER = r"^\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*$"


def _canonical_column(series: pd.Series, name: str) -> tuple[str, npt.NDArray[np.int64], bytes]:
    """(kind, integer codes in sorted order of the values (-1 missing), canonical bytes of the values).

    Kinds: ``null`` (every value missing), ``time`` (UTC, to the microsecond), ``number`` (float64: 3 and
    3.0 are one value, -0.0 is 0.0), ``bool`` and ``text``; an empty string counts as missing (CSV cannot
    tell them apart). Text whose every value is a number (an id read back from CSV) counts as a number, text
    whose every value is an ISO 8601 time (or any value of ``shown_at``/``answered_at``) as a time. The
    checks run on the distinct values only, so a long column costs one factorisation.
    """
    values = series.reset_index(drop=True)
    n = len(values)
    if isinstance(values.dtype, pd.DatetimeTZDtype) or str(values.dtype).startswith("datetime64"):
        missing = values.isna().to_numpy()
        if missing.all():
            return "null", np.full(n, -1, dtype=np.int64), b""
        ints = _utc_ns((values.dt.tz_localize("UTC") if values.dt.tz is None else values)[~missing])
        index = np.full(n, -1, dtype=np.int64)
        index[~missing] = np.arange(int((~missing).sum()))
        codes, distinct = _sorted_codes(index, ints)
        return "time", codes, np.asarray(distinct, dtype=np.int64).tobytes()
    if values.dtype == bool:
        codes, distinct = _sorted_codes(np.arange(n, dtype=np.int64), values.to_numpy(dtype=bool))
        return "bool", codes, "|".join("true" if u else "false" for u in distinct).encode()
    if not _is_text(values) and pd.api.types.is_numeric_dtype(values) and str(values.dtype) != "boolean":
        floats = values.to_numpy(dtype=np.float64, na_value=np.nan) + 0.0  # -0.0 -> 0.0
        missing = np.isnan(floats)
        if missing.all():
            return "null", np.full(n, -1, dtype=np.int64), b""
        index = np.full(n, -1, dtype=np.int64)
        index[~missing] = np.arange(int((~missing).sum()))
        codes, distinct = _sorted_codes(index, floats[~missing])
        return "number", codes, np.asarray(distinct, dtype=np.float64).tobytes()
    # pandas' string dtypes factorise natively; converting to objects first costs more than the rest.
    text_dtype = str(values.dtype) in ("str", "string")
    raw_codes, uniques = pd.factorize(values if text_dtype else values.astype(object), use_na_sentinel=True)
    keep = pd.Index(np.asarray(uniques, dtype=object), dtype=object)
    inferred = pd.api.types.infer_dtype(keep, skipna=True)
    if inferred == "string":
        blank = np.asarray(keep == "", dtype=bool)
        if blank.any():
            position = np.full(len(keep) + 1, -1, dtype=np.int64)
            position[np.flatnonzero(~blank)] = np.arange(int((~blank).sum()))
            raw_codes, keep = position[raw_codes], keep[~blank]
    codes = np.asarray(raw_codes, dtype=np.int64)
    if len(keep) == 0:
        return "null", np.full(n, -1, dtype=np.int64), b""
    if inferred == "boolean":
        codes, distinct = _sorted_codes(codes, np.asarray(keep, dtype=bool))
        return "bool", codes, "|".join("true" if u else "false" for u in distinct).encode()
    if inferred == "string":
        text = pd.Series(keep, dtype=object).str
        # The first distinct value settles most columns before a regex runs over all of them.
        if name in TIMESTAMP_COLUMNS or (_ISO.match(keep[0]) and bool(text.match(_ISO).all())):
            try:
                codes, distinct = _sorted_codes(codes, _utc_ns(keep))
            except (ValueError, TypeError):
                pass
            else:
                return "time", codes, np.asarray(distinct, dtype=np.int64).tobytes()
        if re.match(_NUMBER, keep[0]) and bool(text.match(_NUMBER).all()):
            inferred = "floating"
    if inferred in ("integer", "floating", "mixed-integer-float", "decimal"):
        floats = np.asarray(pd.to_numeric(pd.Series(keep, dtype=object)), dtype=np.float64) + 0.0
        codes, distinct = _sorted_codes(codes, floats)
        return "number", codes, np.asarray(distinct, dtype=np.float64).tobytes()
    codes, distinct = _sorted_codes(codes, keep.astype(str))
    return "text", codes, "\x1f".join(map(str, distinct)).encode()


_MIX = np.uint64(0x9E3779B97F4A7C15)


def table_checksum(table: pd.DataFrame) -> str:
    """sha256 of a canonical form of the table, so that one table written as CSV, JSONL or Parquet and
    read back gives the same checksum.

    The canonical form: columns sorted by name; each column reduced to its kind (``_canonical_column``:
    timestamps in UTC, to the microsecond, whether typed or ISO text, numbers as float64, text as text,
    empty text as missing) and to integer codes of its sorted distinct values. Each row's codes are mixed
    into one 64-bit row key; the sorted row keys (so row order and the index do not count), the column
    names, kinds and distinct values are hashed. It is an identity check, not a signature.

    A table without rows has one checksum whatever its columns: its JSONL file is empty, so nothing of the
    columns reads back (the manifest lists them), and an empty column has no kind to read back either (an
    empty bool column comes back from CSV as text).
    """
    h = hashlib.sha256()
    names = sorted(map(str, table.columns)) if len(table) else []
    h.update("\x1f".join(names).encode())
    by_name = {str(c): c for c in table.columns}
    rows = np.zeros(len(table), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for name in names:
            kind, codes, uniques = _canonical_column(table[by_name[name]], name)
            h.update(b"\x1e" + name.encode() + b"\x1d" + kind.encode() + b"\x1d" + uniques)
            # A column's hashed codes, folded into each row's key (order of columns matters, of rows not).
            hashed = pd.util.hash_array(codes.astype(np.int64), categorize=False)
            rows = (rows * _MIX) ^ hashed
    h.update(np.sort(rows).tobytes())
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
    n_tie: int = 0
    """Ties ("both equally good"): left out of every decided statistic, like "neither"."""
    source: str = ""
    """The comparison table's file name when the analysis read one (file mode); empty for a study's."""


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
