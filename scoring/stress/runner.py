"""Run stress tests end to end: perturb, score with the metric suite, compute the statistics.

`run_stress` is the one entry point; the CLI, the benchmark and (later) the Django command
and background task all call it. Pure Python: no Django.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from modelserver import ChatClient, ChatConfig
from scoring.core.longdoc import SentenceEmbedder
from scoring.stress.longdoc import long_document_analysis
from scoring.stress.perturb import (
    TESTS,
    Perturbed,
    StressError,
    StressRow,
    TestKind,
    added_source_text,
    distractor,
    incremental,
)
from scoring.stress.report import write_report
from scoring.stress.rewrite import PROMPTS, RewriteRecord, SanityPolicy, llm_perturbation
from scoring.stress.similarity import Similarity
from scoring.stress.stats import StressResult, compute_statistics
from scoring.stress.types import MetricBackend, ProgressCallback, StressReport, Timing, VariantScore

__all__ = ["CoreMetrics", "resolve_metrics", "resolve_tests", "run_stress"]


class CoreMetrics:
    """`scoring.core.api` behind the MetricBackend protocol (imported on first use)."""

    def __init__(self) -> None:
        # The metric suite (rouge-score, nltk, sacrebleu, scipy) loads only when no other backend is given.
        from scoring.core import api

        self._api = api
        self._specs = {s.name: s for s in api.metric_specs()}

    def names(self) -> list[str]:
        return list(self._specs)

    def offline(self) -> list[str]:
        return [str(n) for n in self._api.OFFLINE_METRICS]

    def needs(self, name: str) -> frozenset[str]:
        return frozenset(self._specs[name].needs)

    def family(self, name: str) -> str:
        return str(self._specs[name].family)

    def score(self, rows: list[dict[str, Any]], metrics: list[str]) -> list[dict[str, Any]]:
        return list(self._api.score_rows(rows, metrics))


_GROUPS = {
    "all": tuple(TESTS),
    "paper": tuple(n for n, s in TESTS.items() if s.group == "paper"),
    "meaning-preserving": tuple(n for n, s in TESTS.items() if s.group == "meaning-preserving"),
    "deterministic": tuple(n for n, s in TESTS.items() if s.kind is TestKind.DETERMINISTIC),
    "llm": tuple(n for n, s in TESTS.items() if s.kind is TestKind.LLM),
}


def _expand_names(
    names: Sequence[str],
    expand: Callable[[str], Sequence[str]],
    known: Sequence[str],
    unknown: Callable[[str], str],
    empty: str,
) -> list[str]:
    """Each name expanded, checked against `known` and kept once, in order; StressError otherwise."""
    out: list[str] = []
    for name in names:
        name = name.strip()
        if not name:
            continue
        for n in expand(name):
            if n not in known:
                raise StressError(unknown(n))
            if n not in out:
                out.append(n)
    if not out:
        raise StressError(empty)
    return out


def resolve_tests(names: Sequence[str]) -> list[str]:
    """Expand groups (all, paper, meaning-preserving, deterministic, llm) and check every name."""
    known = f"known tests and groups: {', '.join([*TESTS, *_GROUPS])}"
    return _expand_names(
        names,
        lambda name: _GROUPS.get(name, (name,)),
        tuple(TESTS),
        lambda n: f"unknown test {n!r}; {known}",
        f"no stress test given; {known}",
    )


def resolve_metrics(names: Sequence[str], backend: MetricBackend) -> list[str]:
    """Expand "offline" and "all" and check every metric name against the suite."""
    known = backend.names()
    listed = f"known metrics: {', '.join(known)} (or 'offline', 'all')"
    return _expand_names(
        names,
        lambda name: backend.offline() if name == "offline" else known if name == "all" else [name],
        known,
        lambda n: f"unknown metric {n!r}; {listed}",
        f"no metric given; {listed}",
    )


def _code_version() -> str:
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return proc.stdout.strip() or "unknown"


def _rows_digest(rows: Sequence[StressRow]) -> str:
    h = hashlib.sha256()
    for row in rows:
        blob = [row.id, row.summary, row.source, row.reference, row.query, row.persona]
        h.update(json.dumps(blob, ensure_ascii=False).encode("utf-8"))
    return h.hexdigest()


class _Scorer:
    """Scores (row, text) pairs once per metric and run, timing every call."""

    def __init__(self, backend: MetricBackend, rows: Mapping[str, StressRow]) -> None:
        self.backend = backend
        self.rows = rows
        self.memo: dict[tuple[str, str, str], tuple[float | None, str | None]] = {}
        self.timings: list[Timing] = []

    def ensure(self, stage: str, group: str, metrics: Sequence[str], pairs: Sequence[tuple[str, str]]) -> None:
        todo = list(dict.fromkeys(p for p in pairs if any((m, *p) not in self.memo for m in metrics)))
        if not todo:
            self.timings.append(Timing(stage, group, tuple(metrics), 0.0, 0))
            return
        batch = []
        for i, (row_id, text) in enumerate(todo):
            fields = self.rows[row_id].metric_fields()
            batch.append({"id": str(i), "summary": text, **fields})
        started = time.perf_counter()
        out = self.backend.score(batch, list(metrics))
        self.timings.append(Timing(stage, group, tuple(metrics), time.perf_counter() - started, len(todo)))
        by_id = {str(r["id"]): r for r in out}
        for i, pair in enumerate(todo):
            res = by_id.get(str(i), {})
            errors = res.get("errors") or {}
            for metric in metrics:
                value = res.get(metric)
                score = float(value) if isinstance(value, int | float) and math.isfinite(value) else None
                error = None if score is not None else str(errors.get(metric) or "no score returned")
                self.memo[(metric, *pair)] = (score, error)

    def get(self, metric: str, row_id: str, text: str) -> tuple[float | None, str | None]:
        return self.memo[(metric, row_id, text)]


def _progress_fn(progress: bool | ProgressCallback) -> ProgressCallback | None:
    if callable(progress):
        return progress
    if not progress:
        return None
    bars: dict[str, Any] = {}

    def report(stage: str, done: int, total: int) -> None:
        bar = bars.get(stage)
        if bar is None:
            bar = bars[stage] = tqdm(total=total, desc=stage, leave=True)
        bar.n = done
        bar.refresh()
        if done >= total:
            bar.close()

    return report


def run_stress(
    rows: Sequence[Mapping[str, Any] | StressRow],
    tests: Sequence[str],
    metrics: Sequence[str],
    *,
    seed: int,
    judge_config: ChatConfig | None = None,
    out_dir: Path | str | None = None,
    progress: bool | ProgressCallback = False,
    cache_dir: Path | str | None = None,
    backend: MetricBackend | None = None,
    similarity: Similarity | None = None,
    sanity: SanityPolicy | None = None,
    long_document_windows: Sequence[int] = (0, 1, 2),
    long_document_embedder: SentenceEmbedder | None = None,
) -> StressReport:
    """Run `tests` on `rows` for `metrics` and return (and, with out_dir, write) the report.

    judge_config is the model that writes the LLM perturbations; it is required for them and
    its outputs are cached under cache_dir (default out_dir/llm-cache). The seed fixes the
    distractor and added-source draws and is passed to the model. `similarity` (rewrite sanity
    check) and `long_document_embedder` default to MiniLM when installed, else TF-IDF.
    """
    stress_rows = [r if isinstance(r, StressRow) else StressRow.from_mapping(r) for r in rows]
    if not stress_rows:
        raise StressError("no rows to perturb")
    test_names = resolve_tests(tests)
    suite = backend or CoreMetrics()
    metric_names = resolve_metrics(metrics, suite)
    llm_tests = [t for t in test_names if TESTS[t].kind is TestKind.LLM]
    if llm_tests and judge_config is None:
        raise StressError(
            f"the LLM tests {', '.join(llm_tests)} need a rewriter model; configure one "
            "(judge_config / --llm-base-url and --llm-model) or drop them"
        )
    report_progress = _progress_fn(progress)
    by_id = {r.id: r for r in stress_rows}
    if len(by_id) != len(stress_rows):
        raise StressError("row ids must be unique")
    scorer = _Scorer(suite, by_id)
    timings: list[Timing] = []
    rewrites: list[RewriteRecord] = []

    perturbed: dict[str, Perturbed] = {}
    client: ChatClient | None = None
    if llm_tests and judge_config is not None:
        cache = Path(cache_dir) if cache_dir is not None else Path(out_dir) / "llm-cache" if out_dir else None
        seeded = judge_config if judge_config.seed is not None else replace(judge_config, seed=seed)
        seeded = replace(seeded, lane="research")  # rewrites give way to annotators (modelserver.limits)
        client = ChatClient(seeded, cache_dir=cache)
    try:
        for test in test_names:
            spec = TESTS[test]
            if spec.kind is TestKind.LONG_DOCUMENT:
                continue
            started = time.perf_counter()
            if test == "distractor":
                perturbed[test] = distractor(stress_rows, seed=seed)
            elif test == "incremental":
                perturbed[test] = incremental(stress_rows)
            elif test == "added_source_text":
                perturbed[test] = added_source_text(stress_rows, seed=seed)
            else:
                assert client is not None

                def on_done(done: int, total: int, _t: str = test) -> None:
                    if report_progress:
                        report_progress(f"rewrite {_t}", done, total)

                perturbed[test], recs = llm_perturbation(
                    test, stress_rows, client, similarity=similarity, policy=sanity, on_done=on_done
                )
                rewrites.extend(recs)
            timings.append(Timing(test, "(perturb)", (), time.perf_counter() - started, 0))
    finally:
        if client is not None:
            client.close()

    # Originals first, so that the baseline cost is not charged to whichever test runs first.
    families: dict[str, list[str]] = {}
    for metric in metric_names:
        families.setdefault(suite.family(metric), []).append(metric)
    total_steps = len(families) * (1 + len(perturbed))
    step = 0
    stages = [("baseline", [(r.id, r.summary) for r in stress_rows])]
    for test, pert in perturbed.items():
        pairs = [
            (rid, v.text) for rid, levels in pert.variants.items() for lv in levels for v in lv if v.text is not None
        ]
        stages.append((test, pairs))
    for stage, pairs in stages:
        for family, members in families.items():
            scorer.ensure(stage, family, members, pairs)
            step += 1
            if report_progress:
                report_progress("scoring", step, total_steps)
    timings.extend(scorer.timings)

    results: list[StressResult] = []
    variant_scores: list[VariantScore] = []
    for metric in metric_names:
        for test, pert in perturbed.items():
            result, vs = _evaluate(metric, test, pert, stress_rows, scorer, rewrites)
            results.append(result)
            variant_scores.extend(vs)

    long_doc = None
    if "long_document" in test_names:
        started = time.perf_counter()
        long_doc = long_document_analysis(
            stress_rows, metric_names, suite, windows=long_document_windows, embedder=long_document_embedder
        )
        timings.append(
            Timing("long_document", "(all)", tuple(metric_names), time.perf_counter() - started, len(stress_rows))
        )

    provenance: dict[str, Any] = {
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "code_version": _code_version(),
        "rows_sha256": _rows_digest(stress_rows),
        "seed": seed,
        "rewriter": (
            {"base_url": judge_config.base_url, "model": judge_config.model, "temperature": judge_config.temperature}
            if judge_config is not None and llm_tests
            else None
        ),
        "prompt_versions": {t: PROMPTS[t].version for t in llm_tests},
        "similarity_backend": sorted({r.sanity.backend for r in rewrites if r.sanity is not None}),
    }
    report = StressReport(
        seed=seed,
        tests=tuple(test_names),
        metrics=tuple(metric_names),
        n_rows=len(stress_rows),
        results=tuple(results),
        rewrites=tuple(rewrites),
        timings=tuple(timings),
        scores=tuple(variant_scores),
        provenance=provenance,
        long_document=long_doc,
    )
    if out_dir is not None:
        report = write_report(report, Path(out_dir))
    return report


def _evaluate(
    metric: str,
    test: str,
    pert: Perturbed,
    rows: Sequence[StressRow],
    scorer: _Scorer,
    rewrites: Sequence[RewriteRecord],
) -> tuple[StressResult, list[VariantScore]]:
    spec = TESTS[test]
    matrix: list[list[float | None]] = []
    variant_scores: list[VariantScore] = []
    errors: dict[str, int] = {}
    by_group: dict[str, list[float]] = {}
    for row in rows:
        per_level: list[float | None] = []
        for level, variants in enumerate(pert.variants[row.id]):
            vals: list[float] = []
            for k, v in enumerate(variants):
                score: float | None
                error: str | None
                if v.text is None:
                    score, error = None, str(v.note.get("error", "no perturbed text"))
                else:
                    score, error = scorer.get(metric, row.id, v.text)
                if error is not None:
                    errors[error] = errors.get(error, 0) + 1
                if score is not None:
                    vals.append(score)
                    audience = v.note.get("audience")
                    if audience:
                        by_group.setdefault(str(audience), []).append(score)
                variant_scores.append(VariantScore(row.id, test, level, v.label, k, metric, score, error))
            per_level.append(float(np.mean(vals)) if vals else None)
        matrix.append(per_level)
    extra: dict[str, Any] = {}
    if errors:
        top = sorted(errors.items(), key=lambda kv: -kv[1])[:5]
        extra["errors"] = {reason: count for reason, count in top}
    if by_group:
        extra["mean_by_audience"] = {k: float(np.mean(v)) for k, v in sorted(by_group.items())}
    flagged = [r for r in rewrites if r.test == test and r.sanity is not None and r.sanity.flagged]
    if spec.kind is TestKind.LLM:
        extra["rewrites"] = sum(1 for r in rewrites if r.test == test)
        extra["flagged_rewrites"] = len(flagged)
        extra["failed_rewrites"] = sum(1 for r in rewrites if r.test == test and r.text is None)
    result = compute_statistics(
        matrix, metric=metric, test=test, direction=spec.direction, levels=pert.levels, extra=extra
    )
    return result, variant_scores
