"""What a report was computed from: row counts, a checksum of the input table, code version, seed, time."""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.stats._results import ResultMixin

PACKAGE = "satisfy"


def table_checksum(table: pd.DataFrame) -> str:
    """sha256 over the column names and the values, column by column (the index is ignored).

    Text columns (object, string or categorical) contribute their distinct values in order of first
    appearance plus the row codes, so the text dtype does not change the checksum; timestamps count in
    UTC nanoseconds; other columns contribute pandas' per-row hashes (``hash_pandas_object``). Equal
    tables give equal checksums on the same pandas major version; it is an identity check, not a signature.
    """
    h = hashlib.sha256()
    h.update("\x1f".join(map(str, table.columns)).encode())
    for col in table.columns:
        series = table[col]
        h.update(b"\x1e" + str(col).encode())
        if series.dtype == object or str(series.dtype) in ("str", "string", "category"):
            values = series.astype("string").to_numpy(dtype=object, na_value=None)
            codes, uniques = pd.factorize(values, use_na_sentinel=True)
            h.update(codes.astype(np.int64).tobytes())
            h.update("\x1f".join(map(str, uniques)).encode())
            continue
        if isinstance(series.dtype, pd.DatetimeTZDtype):
            series = series.dt.tz_convert("UTC").astype("datetime64[ns, UTC]")
        elif str(series.dtype).startswith("datetime64"):
            series = series.astype("datetime64[ns]")
        h.update(pd.util.hash_pandas_object(series, index=False).to_numpy(dtype=np.uint64).tobytes())
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
