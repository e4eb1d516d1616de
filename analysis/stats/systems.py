"""System ids and per-system tables: the one canonical system id, and each system's mean metric scores,
abstractiveness (RA/SA/AR) and AR risk-band distribution over its distinct candidates (seed 000's tables).

A system id is ``<model>-<condition>`` in lower case, every run of characters other than letters, digits,
``.`` and ``_`` folded to one ``-`` (``DeepSeek-V3.1`` + ``persona`` -> ``deepseek-v3.1-persona``). The
database selector, the legacy import and the file readers all form ids with :func:`system_id` or fold
them with :func:`canonical_system`, so one system has one id whatever path its rows took.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from analysis.stats._results import ResultMixin
from analysis.stats.table import LEFT_PREFIX, RIGHT_PREFIX, first_appearances, metric_names

SYSTEM_COLUMNS: tuple[str, ...] = ("left_system", "right_system", "winner_system")
_FOLD = re.compile(r"[^a-z0-9._]+")
# Seed 000's four bands on bigram AR, as the suite's ``ar_risk`` ordinal codes (0..3).
RISK_BANDS: tuple[str, ...] = ("extractive", "balanced", "moderate", "high")
ABSTRACTIVENESS_PREFIXES: tuple[str, ...] = ("ra_", "sa_", "ar_")


def canonical_system(value: Any) -> Any:
    """Fold a system id to its canonical form; ``None``/NaN stay missing (a "neither" has no winner)."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    return _FOLD.sub("-", str(value).strip().lower()).strip("-")


def system_id(model: str, condition: str) -> str:
    """The canonical id of the system that crossed ``model`` with ``condition``."""
    return str(canonical_system(f"{model}-{condition}"))


def canonicalize_systems(table: pd.DataFrame) -> pd.DataFrame:
    """The table with its system columns folded to canonical ids (a copy; other columns untouched)."""
    present = [c for c in SYSTEM_COLUMNS if c in table.columns]
    if not present:
        return table
    # A shallow copy: only the system columns are replaced (copy-on-write keeps the caller's table as it
    # was), so a large table is not held twice.
    out = table.copy(deep=False)
    for col in present:
        # Fold each distinct id once (a table has a handful of systems and many rows).
        codes, uniques = pd.factorize(out[col], use_na_sentinel=True)
        folded = np.asarray([canonical_system(u) for u in uniques] + [None], dtype=object)
        out[col] = folded[codes]
    return out


@dataclass(frozen=True)
class SystemMetricRow(ResultMixin):
    system: str
    model: str
    condition: str
    n_candidates: int
    means: dict[str, float]


@dataclass(frozen=True)
class SystemRiskRow(ResultMixin):
    system: str
    n_scored: int
    counts: dict[str, int]

    def share(self, band: str) -> float:
        return self.counts.get(band, 0) / self.n_scored if self.n_scored else math.nan


@dataclass(frozen=True)
class SystemTables(ResultMixin):
    """Per-system means of every metric, the abstractiveness subset, and the AR risk bands."""

    metrics: tuple[str, ...]
    abstractiveness: tuple[str, ...]
    rows: tuple[SystemMetricRow, ...]
    risk: tuple[SystemRiskRow, ...]
    all_zero: tuple[str, ...]
    """Metrics that are 0 for every candidate: usually texts missing (e.g. sources never fetched)."""

    def metric_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {"system": r.system, "model": r.model, "condition": r.condition, "candidates": r.n_candidates}
                | {m: r.means.get(m, math.nan) for m in self.metrics}
                for r in self.rows
            ]
        )

    def risk_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {"system": r.system, "scored": r.n_scored} | {b: r.counts.get(b, 0) for b in RISK_BANDS}
                for r in self.risk
            ]
        )


def _as_text(column: pd.Series) -> pd.Series:
    return column if isinstance(column.dtype, pd.StringDtype) else column.astype(str)


def _first_candidates(table: pd.DataFrame) -> npt.NDArray[np.int64]:
    """Positions of the distinct candidates (a candidate appears in round 1 and maybe the final) in the
    left sides followed by the right sides (``n + i`` is row ``i``'s right side), in order of first
    appearance; every side when the table has no candidate ids."""
    n = len(table)
    if "left_candidate" not in table.columns:
        return np.arange(2 * n, dtype=np.int64)
    right = (
        _as_text(table["right_candidate"])
        if "right_candidate" in table.columns
        else pd.Series(np.arange(n).astype(str), index=table.index)
    )
    ids = pd.concat([_as_text(table["left_candidate"]), right], ignore_index=True)
    # A missing id is one candidate, as it was for drop_duplicates.
    codes, _ = pd.factorize(ids, use_na_sentinel=False)
    return first_appearances(codes)


def _side(table: pd.DataFrame, column: str) -> pd.Series:
    """A side's column, or missing values where the table lacks it (as the stacked frame had them)."""
    if column in table.columns:
        return table[column]
    return pd.Series(np.full(len(table), np.nan), index=table.index)


def _side_values(table: pd.DataFrame, column: str, first: npt.NDArray[np.int64]) -> pd.Series:
    """The ``left_<column>`` / ``right_<column>`` value of each distinct candidate (positions ``first``)."""
    n = len(table)
    from_left = first < n
    values = pd.concat(
        [
            _side(table, f"left_{column}").iloc[first[from_left]],
            _side(table, f"right_{column}").iloc[first[~from_left] - n],
        ],
        ignore_index=True,
    )
    # Back to the order of ``first`` (the left ones came first in the concatenation).
    back = np.empty(first.shape[0], dtype=np.int64)
    back[np.concatenate([np.flatnonzero(from_left), np.flatnonzero(~from_left)])] = np.arange(first.shape[0])
    return values.iloc[back].reset_index(drop=True)


def _metric_values(table: pd.DataFrame, metric: str, first: npt.NDArray[np.int64]) -> Any:
    """One metric's score of each distinct candidate, one column at a time: the (2 x rows) x metrics frame
    of both sides stacked is never built (it was the analysis's peak memory at a million rows). The dtype
    is the one stacking would give, so that the means are the same to the last bit."""
    n = len(table)
    from_left = first < n
    left = pd.to_numeric(table[f"{LEFT_PREFIX}{metric}"], errors="coerce")
    right = pd.to_numeric(table[f"{RIGHT_PREFIX}{metric}"], errors="coerce")
    if isinstance(left.dtype, np.dtype) and isinstance(right.dtype, np.dtype):
        dtype = np.result_type(left.dtype, right.dtype)
        lv, rv = left.to_numpy(), right.to_numpy()
    else:  # nullable or Arrow-backed numbers: floats with NaN for missing scores
        dtype = np.dtype(np.float64)
        lv = left.to_numpy(dtype=np.float64, na_value=np.nan)
        rv = right.to_numpy(dtype=np.float64, na_value=np.nan)
    out = np.empty(first.shape[0], dtype=dtype)
    out[from_left] = lv[first[from_left]]
    out[~from_left] = rv[first[~from_left] - n]
    return out


def system_tables(table: pd.DataFrame) -> SystemTables | None:
    """Per-system tables of a comparison table with metric columns; ``None`` when it has none."""
    metrics = metric_names(table)
    if not metrics or "left_system" not in table.columns:
        return None
    first = _first_candidates(table)
    # Each system's candidates in order of first appearance (missing systems left out), systems sorted:
    # what a sorted groupby of the stacked sides gave.
    codes, systems = pd.factorize(_side_values(table, "system", first), sort=True, use_na_sentinel=True)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(systems) + 1))
    groups = [order[bounds[k] : bounds[k + 1]] for k in range(len(systems))]
    labels: dict[str, list[Any]] = {}
    for col in ("model", "condition"):
        if f"left_{col}" in table.columns or f"right_{col}" in table.columns:
            values = _side_values(table, col, first[np.asarray([g[0] for g in groups], dtype=np.int64)])
            labels[col] = list(values)
        else:
            labels[col] = [""] * len(groups)
    means: list[dict[str, float]] = [{} for _ in groups]
    risk_codes: list[pd.Series] = []
    all_zero = []
    for m in metrics:
        values = _metric_values(table, m, first)
        scored = pd.Series(values, copy=False).dropna()
        if scored.size and bool((scored == 0).all()):
            all_zero.append(m)
        for k, g in enumerate(groups):
            column = pd.Series(values[g], copy=False)
            means[k][m] = float(column.mean()) if column.notna().any() else math.nan
        if m == "ar_risk":
            risk_codes = [pd.Series(values[g], copy=False).dropna().round().astype(int) for g in groups]
        del values, scored
    rows = [
        SystemMetricRow(
            system=str(system),
            model=str(labels["model"][k]),
            condition=str(labels["condition"][k]),
            n_candidates=len(groups[k]),
            means=means[k],
        )
        for k, system in enumerate(systems)
    ]
    risk = [
        SystemRiskRow(
            system=str(system),
            n_scored=int(risk_codes[k].size),
            counts={band: int((risk_codes[k] == code).sum()) for code, band in enumerate(RISK_BANDS)},
        )
        for k, system in enumerate(systems)
        if risk_codes
    ]
    abstractive = tuple(m for m in metrics if m.startswith(ABSTRACTIVENESS_PREFIXES) and m != "ar_risk")
    return SystemTables(
        metrics=metrics, abstractiveness=abstractive, rows=tuple(rows), risk=tuple(risk), all_zero=tuple(all_zero)
    )
