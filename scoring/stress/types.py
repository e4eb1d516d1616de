"""The types a stress run hands between its parts: the metric-suite protocol the runner and the long-document
analysis score through, and the results (`StressReport`, `LongDocumentResult`, `Timing`, `VariantScore`) the
runner builds and the report renders. Pure Python: no Django."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from scoring.stress.rewrite import RewriteRecord
from scoring.stress.stats import StressResult, Verdict

__all__ = [
    "LongDocumentResult",
    "MetricBackend",
    "ProgressCallback",
    "StressReport",
    "Timing",
    "VariantScore",
]

ProgressCallback = Callable[[str, int, int], None]
"""Called as (stage, done, total) while a run advances."""


class MetricBackend(Protocol):
    """What the runner needs from a metric suite (the real one is `scoring.core.api`)."""

    def names(self) -> list[str]: ...

    def offline(self) -> list[str]: ...

    def needs(self, name: str) -> frozenset[str]: ...

    def family(self, name: str) -> str: ...

    def score(self, rows: list[dict[str, Any]], metrics: list[str]) -> list[dict[str, Any]]: ...


def _opt(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _fmt(x: float, digits: int = 2) -> str:
    return "undef" if not math.isfinite(x) else f"{x:.{digits}f}"


@dataclass(frozen=True)
class LongDocumentResult:
    """Per metric: mean summary score for each retrieval window, and mean sentence score per similarity bin."""

    windows: tuple[int, ...]
    top_k: int
    embedder: str
    n_documents: int
    n_sentences: int
    window_means: Mapping[str, tuple[float, ...]]
    document_scores: Mapping[str, Mapping[str, tuple[float, ...]]]
    """document_scores[metric][row_id][i] is the summary score at windows[i] (NaN when unscored)."""
    bin_window: int
    bin_edges: tuple[float, ...]
    bin_counts: tuple[int, ...]
    bin_means: Mapping[str, tuple[float, ...]]
    skipped: Mapping[str, str] = field(default_factory=dict)
    """Metrics that cannot take a snippet (they read neither source nor reference), with why."""

    @property
    def bin_labels(self) -> tuple[str, ...]:
        return tuple(f"{a:.2f}-{b:.2f}" for a, b in zip(self.bin_edges[:-1], self.bin_edges[1:], strict=True))

    def to_dict(self) -> dict[str, Any]:
        return {
            "windows": list(self.windows),
            "top_k": self.top_k,
            "embedder": self.embedder,
            "n_documents": self.n_documents,
            "n_sentences": self.n_sentences,
            "window_means": {m: [_opt(v) for v in vals] for m, vals in self.window_means.items()},
            "document_scores": {
                m: {rid: [_opt(v) for v in vals] for rid, vals in docs.items()}
                for m, docs in self.document_scores.items()
            },
            "bin_window": self.bin_window,
            "bin_edges": list(self.bin_edges),
            "bin_labels": list(self.bin_labels),
            "bin_counts": list(self.bin_counts),
            "bin_means": {m: [_opt(v) for v in vals] for m, vals in self.bin_means.items()},
            "skipped": dict(self.skipped),
        }


@dataclass(frozen=True)
class Timing:
    """Wall time of one stage: perturbing for a test, or scoring its new texts with one metric family.

    Metrics of one family are scored in one call because the suite computes them together
    (ROUGE-1/2/L in one pass, all DataStats at once); `metrics` lists the ones in the call.
    """

    stage: str
    group: str
    metrics: tuple[str, ...]
    seconds: float
    n_texts: int

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "metrics": list(self.metrics), "seconds": round(self.seconds, 4)}


@dataclass(frozen=True)
class VariantScore:
    row_id: str
    test: str
    level: int
    label: str
    variant: int
    metric: str
    score: float | None
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class StressReport:
    """Everything a stress run produced, with the provenance an export must state."""

    seed: int
    tests: tuple[str, ...]
    metrics: tuple[str, ...]
    n_rows: int
    results: tuple[StressResult, ...]
    rewrites: tuple[RewriteRecord, ...]
    timings: tuple[Timing, ...]
    scores: tuple[VariantScore, ...]
    provenance: Mapping[str, Any]
    long_document: LongDocumentResult | None = None
    """The long-document analysis, when the long_document test ran."""
    files: Mapping[str, str] = field(default_factory=dict)

    def result(self, metric: str, test: str) -> StressResult:
        for r in self.results:
            if r.metric == metric and r.test == test:
                return r
        raise KeyError(f"no result for metric {metric!r} and test {test!r}")

    def grid(self) -> dict[str, dict[str, str]]:
        """verdict[metric][test], the pass/fail grid of the paper's table."""
        out: dict[str, dict[str, str]] = {m: {} for m in self.metrics}
        for r in self.results:
            out[r.metric][r.test] = r.verdict.value
        return out

    def summary(self) -> str:
        """A plain-text table: one line per metric and test."""
        lines = [f"{'metric':<22}{'test':<20}{'rho':>8}{'M':>7}{'d':>8}{'|change|':>10}  verdict"]
        for r in self.results:
            lines.append(
                f"{r.metric:<22}{r.test:<20}{'n/a' if r.rho_verdict is Verdict.NOT_APPLICABLE else _fmt(r.rho):>8}"
                f"{_fmt(r.monotonicity):>7}"
                f"{_fmt(r.cohens_d):>8}{_fmt(r.mean_abs_change, 4):>10}  {r.verdict.value}"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "tests": list(self.tests),
            "metrics": list(self.metrics),
            "n_rows": self.n_rows,
            "provenance": dict(self.provenance),
            "grid": self.grid(),
            "results": [r.to_dict() for r in self.results],
            "rewrites": [r.to_dict() for r in self.rewrites],
            "timings": [t.to_dict() for t in self.timings],
            "long_document": self.long_document.to_dict() if self.long_document is not None else None,
            "files": dict(self.files),
        }
