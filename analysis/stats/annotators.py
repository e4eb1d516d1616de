"""Per-annotator breakdown and time spent per page (one page = one match)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from analysis.stats._results import ResultMixin, fmt, text_table
from analysis.stats.table import PreparedTable, placement_recorded, stage_order

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class AnnotatorSummary(ResultMixin):
    annotator: str
    n_matches: int
    n_queries: int
    n_decided: int
    neither_rate: float
    left_win_rate: float
    personalized_wins: int
    personalized_decided: int
    personalized_win_rate: float
    median_seconds: float


@dataclass(frozen=True)
class PageTime(ResultMixin):
    """Seconds on page for one stage ("all", then each stage of the table: "round1", ..., "final")."""

    stage: str
    n: int
    median: float
    q1: float
    q3: float
    iqr: float
    mean: float


def _ratio(a: float, b: float) -> float:
    return float(a / b) if b > 0 else float("nan")


def seconds_on_page(t: PreparedTable) -> FloatArray:
    """``seconds_on_page`` if present, else ``answered_at - shown_at``; NaN where unknown."""
    frame = t.frame
    if "seconds_on_page" in frame.columns:
        secs = pd.to_numeric(frame["seconds_on_page"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        if np.isfinite(secs).any() or not {"shown_at", "answered_at"} <= set(frame.columns):
            return np.asarray(secs, dtype=np.float64)
    if {"shown_at", "answered_at"} <= set(frame.columns):
        delta = pd.to_datetime(frame["answered_at"], utc=True, errors="coerce") - pd.to_datetime(
            frame["shown_at"], utc=True, errors="coerce"
        )
        return np.asarray(delta.dt.total_seconds().to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
    return np.full(t.n_rows, np.nan)


def page_times(t: PreparedTable) -> tuple[PageTime, ...]:
    """Median, quartiles and mean of seconds per page, overall and per stage (negative times dropped)."""
    secs = seconds_on_page(t)
    out = []
    for stage in ("all", *stage_order(t.stage)):
        rows = np.ones(t.n_rows, dtype=np.bool_) if stage == "all" else np.asarray(t.stage == stage, dtype=np.bool_)
        x = secs[rows & np.isfinite(secs) & (secs >= 0)]
        if x.size:
            q1, med, q3 = (float(v) for v in np.quantile(x, [0.25, 0.5, 0.75]))
            out.append(PageTime(stage, int(x.size), med, q1, q3, q3 - q1, float(x.mean())))
        else:
            nan = float("nan")
            out.append(PageTime(stage, 0, nan, nan, nan, nan, nan))
    return tuple(out)


def annotator_breakdown(
    t: PreparedTable, *, persona: str = "persona", generic: str = "generic"
) -> tuple[AnnotatorSummary, ...]:
    """One summary row per annotator (pseudonymous code as in the table)."""
    frame = t.frame
    secs = seconds_on_page(t)
    left_p = np.asarray((t.left_condition == persona) & (t.right_condition == generic), dtype=np.bool_)
    right_p = np.asarray((t.right_condition == persona) & (t.left_condition == generic), dtype=np.bool_)
    p_win = (left_p & t.left_won) | (right_p & t.right_won)
    p_dec = (left_p | right_p) & t.decided
    sums = {
        "matches": t.per_annotator(np.ones(t.n_rows)),
        "decided": t.per_annotator(t.decided),
        "neither": t.per_annotator(t.neither),
        # Left-side wins only where the placement was recorded (the legacy export did not record it).
        "left": t.per_annotator(t.left_won & placement_recorded(t)),
        "placed_decided": t.per_annotator(t.decided & placement_recorded(t)),
        "p_win": t.per_annotator(p_win),
        "p_dec": t.per_annotator(p_dec),
    }
    query_col = (
        "query_id" if "query_id" in frame.columns else ("query_index" if "query_index" in frame.columns else None)
    )
    if query_col is not None:
        queries = pd.DataFrame({"a": t.annotator_code, "q": frame[query_col].to_numpy()}).groupby("a")["q"].nunique()
        n_queries = queries.reindex(range(t.n_annotators), fill_value=0).to_numpy()
    else:
        n_queries = np.zeros(t.n_annotators, dtype=np.int64)
    med = pd.Series(secs).groupby(t.annotator_code).median().reindex(range(t.n_annotators)).to_numpy(dtype=np.float64)
    return tuple(
        AnnotatorSummary(
            annotator=name,
            n_matches=int(sums["matches"][i]),
            n_queries=int(n_queries[i]),
            n_decided=int(sums["decided"][i]),
            neither_rate=_ratio(sums["neither"][i], sums["matches"][i]),
            left_win_rate=_ratio(sums["left"][i], sums["placed_decided"][i]),
            personalized_wins=int(sums["p_win"][i]),
            personalized_decided=int(sums["p_dec"][i]),
            personalized_win_rate=_ratio(sums["p_win"][i], sums["p_dec"][i]),
            median_seconds=float(med[i]),
        )
        for i, name in enumerate(t.annotators)
    )


def page_time_summary(times: tuple[PageTime, ...]) -> str:
    rows = [[p.stage, str(p.n), fmt(p.median, 1), f"[{fmt(p.q1, 1)}, {fmt(p.q3, 1)}]", fmt(p.mean, 1)] for p in times]
    return "Seconds per page\n" + text_table(["stage", "n", "median", "IQR", "mean"], rows)
