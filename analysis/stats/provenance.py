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
    """sha256 over the column names and pandas' per-row hashes (``hash_pandas_object``, index ignored).

    Equal tables (same columns in the same order, same values and dtypes kind) give equal checksums
    on the same pandas major version; it is an identity check, not a cryptographic signature.
    """
    h = hashlib.sha256()
    h.update("\x1f".join(map(str, table.columns)).encode())
    for col in table.columns:
        series = table[col]
        if series.dtype == object or str(series.dtype) in ("str", "string", "category"):
            series = series.astype(object).where(series.notna(), None).map(lambda v: None if v is None else str(v))
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
