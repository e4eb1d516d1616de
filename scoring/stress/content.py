"""What a stress report shows, computed in one step from a `StressReport`: the JSON document, the CSV rows, the
pass/fail grid, each test's level panels, the meaning-preserving heat table, the rewrite summary and the
long-document series. `scoring.stress.report` renders a `StressContent` and computes nothing of its own."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scoring.core.longdoc import embedder_warning
from scoring.stress.perturb import TESTS
from scoring.stress.stats import StressResult, Verdict
from scoring.stress.types import StressReport, Timing

__all__ = ["CSV_FIELDS", "LevelFigure", "StressContent", "level_figure_data", "stress_content"]

CSV_FIELDS = (
    "metric", "test", "direction", "n_rows", "levels", "level_means", "rho", "monotonicity",
    "cohens_d", "mean_abs_change", "rho_verdict", "m_verdict", "verdict",
)  # fmt: skip
SCORE_FIELDS = ("row_id", "test", "level", "label", "variant", "metric", "score", "error")


@dataclass(frozen=True)
class GridTest:
    name: str
    description: str
    direction: str


@dataclass(frozen=True)
class GridCell:
    """One metric's rho and M on one test; ``rho`` None: not applicable (a stable test over two levels)."""

    rho: float | None
    rho_verdict: Verdict
    monotonicity: float
    m_verdict: Verdict


@dataclass(frozen=True)
class GridRow:
    metric: str
    cells: tuple[GridCell | None, ...]
    passed: int


@dataclass(frozen=True)
class LevelPanel:
    metric: str
    levels: tuple[str, ...]
    means: tuple[float, ...]
    """NaN where a level has no mean."""
    reference: float
    """The unperturbed summary's mean (NaN when unknown)."""


@dataclass(frozen=True)
class LevelFigure:
    """Mean score by perturbation level for one test, one panel per metric."""

    test: str
    title: str
    panels: tuple[LevelPanel, ...]


@dataclass(frozen=True)
class RewriteRow:
    test: str
    rewrites: int
    failed: int
    flagged: int
    mean_similarity: float
    prompt_version: int


@dataclass(frozen=True)
class FlaggedRewrite:
    test: str
    row_id: str
    label: str
    reasons: str


@dataclass(frozen=True)
class LongDocumentContent:
    n_documents: int
    n_sentences: int
    top_k: int
    bin_window: int
    window_labels: tuple[str, ...]
    window_means: Mapping[str, list[float | None]]
    bin_labels: tuple[str, ...]
    bin_means: Mapping[str, list[float | None]]
    bin_counts: str
    """Sentences per bin, as "label: count, ..."."""
    embedder: str = ""
    embedder_warning: str | None = None
    """Said when the sentence embedder is the TF-IDF fallback (`scoring.core.longdoc.embedder_warning`)."""


@dataclass(frozen=True)
class StressContent:
    """Everything the stress report shows, in page order, and what its JSON and CSV files hold."""

    n_rows: int
    n_metrics: int
    n_tests: int
    seed: int
    grid_tests: tuple[GridTest, ...]
    grid: tuple[GridRow, ...]
    level_figures: tuple[LevelFigure, ...]
    meaning_tests: tuple[str, ...]
    meaning_rows: tuple[tuple[str, tuple[tuple[float, float] | None, ...]], ...]
    """Per metric, per meaning-preserving test: (mean absolute change, share of the original mean)."""
    any_rewrites: bool
    rewrites: tuple[RewriteRow, ...]
    """One row per test with rewrites."""
    flagged: tuple[FlaggedRewrite, ...]
    long_document: LongDocumentContent | None
    provenance: tuple[tuple[str, str], ...]
    """(key, value as JSON)."""
    timings: tuple[Timing, ...]
    data: Mapping[str, Any]
    """The JSON document (`StressReport.to_dict()`)."""
    results_rows: tuple[Mapping[str, Any], ...]
    score_rows: tuple[Mapping[str, Any], ...]


def _reference_level(r: StressResult) -> int:
    # Incremental addition ends at the original summary; every other test starts from it.
    return len(r.level_means) - 1 if r.test == "incremental" else 0


def level_figure_data(report: StressReport, test: str) -> LevelFigure:
    """The level panels of one test, one per metric, in the report's result order."""
    panels = []
    for r in report.results:
        if r.test != test:
            continue
        means = tuple(m if math.isfinite(m) else math.nan for m in r.level_means)
        reference = r.level_means[_reference_level(r)] if r.level_means else math.nan
        panels.append(LevelPanel(r.metric, tuple(r.levels), means, reference))
    ref_name = "the full summary" if test == "incremental" else "the original"
    title = f"{test} ({TESTS[test].direction.value}): mean score; dashed = {ref_name}"
    return LevelFigure(test, title, tuple(panels))


def _grid(report: StressReport) -> tuple[tuple[GridTest, ...], tuple[GridRow, ...]]:
    tests = [t for t in report.tests if t in {r.test for r in report.results}]
    by = {(r.metric, r.test): r for r in report.results}
    rows = []
    for m in report.metrics:
        cells: list[GridCell | None] = []
        for t in tests:
            r = by.get((m, t))
            if r is None:
                cells.append(None)
                continue
            rho = None if r.rho_verdict is Verdict.NOT_APPLICABLE else r.rho
            cells.append(GridCell(rho, r.rho_verdict, r.monotonicity, r.m_verdict))
        passed = sum(1 for t in tests if (m, t) in by and by[(m, t)].verdict is Verdict.PASS)
        rows.append(GridRow(m, tuple(cells), passed))
    heads = tuple(GridTest(t, TESTS[t].description, TESTS[t].direction.value) for t in tests)
    return heads, tuple(rows)


def _meaning_preserving(report: StressReport) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    tests = tuple(t for t in report.tests if TESTS[t].group == "meaning-preserving")
    if not tests:
        return (), ()
    by = {(r.metric, r.test): r for r in report.results}
    rows = []
    for m in report.metrics:
        cells: list[tuple[float, float] | None] = []
        for t in tests:
            r = by.get((m, t))
            if r is None:
                cells.append(None)
                continue
            base = r.level_means[0]
            rel = r.mean_abs_change / abs(base) if math.isfinite(base) and base != 0 else math.nan
            cells.append((r.mean_abs_change, rel))
        rows.append((m, tuple(cells)))
    return tests, tuple(rows)


def _rewrites(report: StressReport) -> tuple[tuple[RewriteRow, ...], tuple[FlaggedRewrite, ...]]:
    rows = []
    for test in report.tests:
        recs = [r for r in report.rewrites if r.test == test]
        if not recs:
            continue
        sims = [r.sanity.similarity for r in recs if r.sanity is not None]
        rows.append(
            RewriteRow(
                test=test,
                rewrites=len(recs),
                failed=sum(1 for r in recs if r.text is None),
                flagged=sum(1 for r in recs if r.sanity is not None and r.sanity.flagged),
                mean_similarity=sum(sims) / len(sims) if sims else math.nan,
                prompt_version=recs[0].prompt_version,
            )
        )
    examples = [r for r in report.rewrites if r.sanity is not None and r.sanity.flagged][:10]
    flagged = tuple(
        FlaggedRewrite(r.test, r.row_id, r.label, "; ".join(r.sanity.reasons) if r.sanity else "") for r in examples
    )
    return tuple(rows), flagged


def _long_document(data: Mapping[str, Any]) -> LongDocumentContent | None:
    d = data["long_document"]
    if d is None:
        return None
    bins = tuple(d["bin_labels"])
    return LongDocumentContent(
        n_documents=d["n_documents"],
        n_sentences=d["n_sentences"],
        top_k=d["top_k"],
        bin_window=d["bin_window"],
        window_labels=tuple(f"w={w}" for w in d["windows"]),
        window_means=dict(d["window_means"]),
        bin_labels=bins,
        bin_means=dict(d["bin_means"]),
        bin_counts=", ".join(f"{lab}: {c}" for lab, c in zip(bins, d["bin_counts"], strict=True)),
        embedder=str(d["embedder"]),
        embedder_warning=embedder_warning(str(d["embedder"])),
    )


def _result_row(d: Mapping[str, Any]) -> dict[str, Any]:
    """A row of results.csv from the result's JSON form (levels and level means joined with "|")."""
    row = {k: d[k] for k in CSV_FIELDS}
    row["levels"] = "|".join(d["levels"])
    row["level_means"] = "|".join("" if m is None else f"{m:.6g}" for m in d["level_means"])
    return row


def stress_content(report: StressReport) -> StressContent:
    """Compute everything the stress report shows (its ``files`` already set, as the JSON states them)."""
    data = report.to_dict()
    grid_tests, grid = _grid(report)
    meaning_tests, meaning_rows = _meaning_preserving(report)
    rewrites, flagged = _rewrites(report)
    return StressContent(
        n_rows=report.n_rows,
        n_metrics=len(report.metrics),
        n_tests=len(report.tests),
        seed=report.seed,
        grid_tests=grid_tests,
        grid=grid,
        level_figures=tuple(
            level_figure_data(report, test) for test in report.tests if any(r.test == test for r in report.results)
        ),
        meaning_tests=meaning_tests,
        meaning_rows=meaning_rows,
        any_rewrites=bool(report.rewrites),
        rewrites=rewrites,
        flagged=flagged,
        long_document=_long_document(data),
        provenance=tuple((k, json.dumps(v, ensure_ascii=False)) for k, v in report.provenance.items()),
        timings=report.timings,
        data=data,
        results_rows=tuple(_result_row(d) for d in data["results"]),
        score_rows=tuple(s.to_dict() for s in report.scores),
    )
