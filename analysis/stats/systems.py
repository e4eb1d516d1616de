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
import pandas as pd

from analysis.stats._results import ResultMixin
from analysis.stats.table import LEFT_PREFIX, RIGHT_PREFIX, metric_names

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


def _candidates(table: pd.DataFrame, metrics: tuple[str, ...]) -> pd.DataFrame:
    """One row per distinct candidate (a candidate appears in round 1 and maybe the final)."""
    parts = []
    for side in ("left", "right"):
        cols = {f"{side}_system": "system", f"{side}_model": "model", f"{side}_condition": "condition"}
        part = table[[c for c in cols if c in table.columns]].rename(columns=cols)
        for m in metrics:
            part[m] = pd.to_numeric(table[f"{LEFT_PREFIX if side == 'left' else RIGHT_PREFIX}{m}"], errors="coerce")
        key = f"{side}_candidate"
        part["candidate"] = table[key].astype(str) if key in table.columns else np.arange(len(table)).astype(str)
        parts.append(part)
    both = pd.concat(parts, ignore_index=True)
    return both.drop_duplicates(subset=["candidate"]) if "left_candidate" in table.columns else both


def system_tables(table: pd.DataFrame) -> SystemTables | None:
    """Per-system tables of a comparison table with metric columns; ``None`` when it has none."""
    metrics = metric_names(table)
    if not metrics or "left_system" not in table.columns:
        return None
    cands = _candidates(table, metrics)
    for col in ("model", "condition"):
        if col not in cands.columns:
            cands[col] = ""
    rows, risk = [], []
    for system, group in cands.groupby("system", sort=True):
        means = {m: float(group[m].mean()) if group[m].notna().any() else math.nan for m in metrics}
        rows.append(
            SystemMetricRow(
                system=str(system),
                model=str(group["model"].iloc[0]),
                condition=str(group["condition"].iloc[0]),
                n_candidates=len(group),
                means=means,
            )
        )
        if "ar_risk" in metrics:
            codes = group["ar_risk"].dropna().round().astype(int)
            counts = {band: int((codes == code).sum()) for code, band in enumerate(RISK_BANDS)}
            risk.append(SystemRiskRow(system=str(system), n_scored=int(codes.size), counts=counts))
    abstractive = tuple(m for m in metrics if m.startswith(ABSTRACTIVENESS_PREFIXES) and m != "ar_risk")
    all_zero = tuple(m for m in metrics if cands[m].notna().any() and bool((cands[m].dropna() == 0).all()))
    return SystemTables(
        metrics=metrics, abstractiveness=abstractive, rows=tuple(rows), risk=tuple(risk), all_zero=all_zero
    )
