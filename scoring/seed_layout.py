"""Seed 003's experiment layout on a long-document file: metric x window means and perturbation changes.

    python -m scoring.seed_layout --dataset squality --out out/seed003
    python -m scoring.seed_layout --input rows.jsonl --metrics summac_zs,minicheck --out out/seed003

Table 1: each metric's mean summary score with retrieval windows w = 0, 1, 2 (every summary sentence against
the top-K source sentences widened by w, max over snippets, mean over sentences). Table 2: the mean absolute
score change per meaning-preserving perturbation, every text scored the same windowed way (w =
--perturbation-window). The perturbations and window scoring are the stress tests' own (`scoring.stress`);
the LLM rewrites need a rewriter model, `added_source_text` needs none. Writes ``manifest.json`` (input
digest, metrics and their weights, sentence embedder, device, settings), ``seed_layout.json`` and
``table.txt`` into --out. Plain Python: ``manage.py seed_layout`` calls :func:`main` with the same arguments.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernel.cli import at_least_one, out_dir_problem
from scoring.core import hf_models
from scoring.core.factuality import FACTUALITY_METRICS, weights_manifest
from scoring.core.longdoc import SentenceEmbedder, TfidfEmbedder, default_embedder, embedder_warning
from scoring.core.windowed import MemoEmbedder, MemoMetrics, WindowedMetrics
from scoring.stress.datasets import shared_data_dir, squality_rows
from scoring.stress.perturb import MEANING_PRESERVING, StressError, StressRow

__all__ = ["SEED_METRICS", "SeedLayoutResult", "build_parser", "main", "run_seed_layout"]

SEED_METRICS: tuple[str, ...] = tuple(m.name for m in FACTUALITY_METRICS)
"""Seed 003's six metrics in its table order: BARTScore, MiniCheck, SummaC-Conv, SummaC-ZS, AlignScore, UniEval."""


def _fmt(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _opt(value: float) -> float | None:
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class SeedLayoutResult:
    """The two tables of seed 003 with the provenance that makes them comparable."""

    metrics: tuple[str, ...]
    windows: tuple[int, ...]
    window_means: Mapping[str, tuple[float, ...]]
    perturbations: tuple[str, ...]
    perturbation_window: int
    mean_abs_change: Mapping[str, Mapping[str, float]]
    original_means: Mapping[str, float]
    perturbed_means: Mapping[str, Mapping[str, float]]
    errors: Mapping[str, Mapping[str, int]]
    manifest: Mapping[str, Any]
    long_document: Any = None
    stress: Any = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def table(self) -> str:
        """Both tables as fixed-width text, with the embedder named (and warned about when it is TF-IDF)."""
        width = max(12, *(len(m) + 2 for m in self.metrics))
        emb = self.manifest["embedder"]
        lines = [
            f"Seed 003 layout: {self.manifest['n_documents']} documents, {self.manifest['n_sentences']} summary "
            f"sentences, top-K {self.manifest['top_k']}, sentence embedder {emb['name']}, device "
            f"{self.manifest['device']}",
        ]
        if emb.get("warning"):
            lines.append(f"WARNING: {emb['warning']}")
        lines += [
            "",
            "Mean score by retrieval window",
            f"{'metric':<{width}}" + "".join(f"{'w=' + str(w):>10}" for w in self.windows),
        ]
        for m in self.metrics:
            lines.append(f"{m:<{width}}" + "".join(f"{_fmt(v):>10}" for v in self.window_means.get(m, ())))
        if self.perturbations:
            cols = [max(10, len(p) + 2) for p in self.perturbations]
            lines += [
                "",
                f"Mean absolute score change per perturbation (w={self.perturbation_window}; original mean first)",
                f"{'metric':<{width}}{'original':>10}"
                + "".join(f"{p:>{c}}" for p, c in zip(self.perturbations, cols, strict=True)),
            ]
            for m in self.metrics:
                changes = self.mean_abs_change.get(m, {})
                lines.append(
                    f"{m:<{width}}{_fmt(self.original_means.get(m)):>10}"
                    + "".join(f"{_fmt(changes.get(p)):>{c}}" for p, c in zip(self.perturbations, cols, strict=True))
                )
        failed = {m: e for m, e in self.errors.items() if e}
        if failed:
            lines += ["", "(sentence, snippet) pairs a metric could not score (commonest reason):"]
            for m, reasons in failed.items():
                reason, count = next(iter(reasons.items()))
                lines.append(f"  {m}: {sum(reasons.values())} pairs, {count} of them: {reason}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "manifest": dict(self.manifest),
            "metrics": list(self.metrics),
            "windows": list(self.windows),
            "window_means": {m: [_opt(v) for v in vals] for m, vals in self.window_means.items()},
            "perturbations": list(self.perturbations),
            "perturbation_window": self.perturbation_window,
            "mean_abs_change": {m: {p: _opt(v) for p, v in d.items()} for m, d in self.mean_abs_change.items()},
            "original_means": {m: _opt(v) for m, v in self.original_means.items()},
            "perturbed_means": {m: {p: _opt(v) for p, v in d.items()} for m, d in self.perturbed_means.items()},
            "errors": {m: dict(e) for m, e in self.errors.items()},
            "long_document": self.long_document.to_dict() if self.long_document is not None else None,
            "stress_results": [r.to_dict() for r in self.stress.results] if self.stress is not None else [],
            "notes": list(self.notes),
        }


def _code_version() -> str:
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],  # noqa: S607 - git from PATH, fixed arguments
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return proc.stdout.strip() or "unknown"


def _digest(rows: Sequence[Any]) -> str:
    h = hashlib.sha256()
    for row in rows:
        h.update(json.dumps([row.id, row.summary, row.source], ensure_ascii=False).encode("utf-8"))
    return h.hexdigest()


def _metric_versions(names: Sequence[str]) -> dict[str, str]:
    from scoring.core.registry import specs_by_name  # the metric suite: rouge-score, nltk, sacrebleu

    table = specs_by_name()
    return {n: table[n][0].version for n in names if n in table}


def run_seed_layout(
    rows: Sequence[Mapping[str, Any]],
    metrics: Sequence[str] = SEED_METRICS,
    *,
    windows: Sequence[int] = (0, 1, 2),
    top_k: int = 3,
    perturbations: Sequence[str] | None = None,
    perturbation_window: int = 1,
    seed: int = 0,
    judge_config: Any = None,
    cache_dir: Path | None = None,
    embedder: SentenceEmbedder | None = None,
    backend: Any = None,
    input_name: str = "",
) -> SeedLayoutResult:
    """Run seed 003's layout on ``rows`` (``id``, ``summary``, ``source``).

    ``perturbations`` defaults to the seven meaning-preserving ones when a rewriter (``judge_config``) is
    given, else to ``added_source_text``, the one that needs no model. ``backend`` is the metric suite
    (default: the registry's, `scoring.stress.runner.CoreMetrics`).
    """
    from scoring.stress.longdoc import long_document_analysis  # scipy and the openai client
    from scoring.stress.runner import CoreMetrics, resolve_metrics, resolve_tests, run_stress  # the same

    stress_rows = [r if isinstance(r, StressRow) else StressRow.from_mapping(r) for r in rows]
    if not stress_rows:
        raise StressError("no rows to score")
    if len({r.id for r in stress_rows}) != len(stress_rows):
        raise StressError("row ids must be unique")
    if not windows or any(w < 0 for w in windows):
        raise StressError("windows must be one or more whole numbers of at least 0")
    if perturbation_window < 0 or top_k < 1:
        raise StressError("the perturbation window must be at least 0 and top-K at least 1")
    suite = MemoMetrics(backend or CoreMetrics())
    names = resolve_metrics(list(metrics), suite)
    notes: list[str] = []
    if perturbations is None:
        if judge_config is not None:
            chosen = list(MEANING_PRESERVING)
        else:
            chosen = ["added_source_text"]
            notes.append(
                "only added_source_text ran: the six LLM rewrites (paraphrased, simplified, synonym_replaced, "
                "less_diverse, negated, summarised) need a rewriter model (--llm-base-url, --llm-model)"
            )
    else:
        chosen = resolve_tests(list(perturbations)) if perturbations else []
        if "long_document" in chosen:
            chosen.remove("long_document")  # the window table is this layout's own long-document run
    emb = MemoEmbedder(embedder or default_embedder())

    sweep = long_document_analysis(stress_rows, names, suite, windows=tuple(windows), top_k=top_k, embedder=emb)

    report = None
    changes: dict[str, dict[str, float]] = {m: {} for m in names}
    perturbed: dict[str, dict[str, float]] = {m: {} for m in names}
    originals: dict[str, float] = {}
    if chosen:
        windowed = WindowedMetrics(suite, window=perturbation_window, top_k=top_k, embedder=emb)
        report = run_stress(
            stress_rows, chosen, names, seed=seed, judge_config=judge_config, backend=windowed, cache_dir=cache_dir
        )
        for result in report.results:
            changes[result.metric][result.test] = result.mean_abs_change
            perturbed[result.metric][result.test] = result.level_means[-1]
            originals.setdefault(result.metric, result.level_means[0])
    errors = {m: dict(sorted(suite.failures.get(m, {}).items(), key=lambda kv: -kv[1])) for m in names}

    inner_embedder = emb.inner
    reason = getattr(inner_embedder, "fallback_reason", None) if isinstance(inner_embedder, TfidfEmbedder) else None
    manifest: dict[str, Any] = {
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "code_version": _code_version(),
        "input": input_name,
        "rows_sha256": _digest(stress_rows),
        "n_documents": sweep.n_documents,
        "n_sentences": sweep.n_sentences,
        "metrics": _metric_versions(names),
        "weights": weights_manifest(names),
        "weights_dir": str(hf_models.weights_dir() or ""),
        "embedder": {
            "name": emb.name,
            "fallback": reason is not None,  # TF-IDF because the sentence encoder could not load
            "fallback_reason": reason,
            "warning": embedder_warning(emb.name, reason),
        },
        "device": hf_models.current_device(),
        "batch_size": hf_models.current_batch_size(),
        "windows": list(windows),
        "top_k": top_k,
        "perturbations": chosen,
        "perturbation_window": perturbation_window,
        "seed": seed,
        "rewriter": (
            {"base_url": judge_config.base_url, "model": judge_config.model} if judge_config is not None else None
        ),
        "pairs_scored": suite.scored,
        "pairs_asked": suite.asked,
    }
    return SeedLayoutResult(
        metrics=tuple(names),
        windows=tuple(windows),
        window_means=dict(sweep.window_means),
        perturbations=tuple(chosen),
        perturbation_window=perturbation_window,
        mean_abs_change=changes,
        original_means=originals,
        perturbed_means=perturbed,
        errors=errors,
        manifest=manifest,
        long_document=sweep,
        stress=report,
        notes=tuple(notes),
    )


def _int_list(text: str) -> list[int]:
    try:
        values = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated whole numbers, not {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"must be one or more whole numbers of at least 0, not {text!r}")
    return values


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, not {value}")
    return value


def build_parser(
    prog: str = "python -m scoring.seed_layout", defaults: Mapping[str, Any] | None = None
) -> argparse.ArgumentParser:
    """The options; ``defaults`` (weights_dir, device, batch_size) are the Django settings when called from
    ``manage.py seed_layout``, else the environment's METRICS_WEIGHTS_DIR, METRICS_DEVICE, METRICS_BATCH_SIZE."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Seed 003's layout: factuality metrics x retrieval window, and score change per perturbation.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", type=Path, help="JSONL file of long-document rows (id, summary, source)")
    source.add_argument("--dataset", choices=["squality"], help="a shared data set (SQuALITY: shared/data/squality)")
    parser.add_argument("--out", required=True, type=Path, help="folder for manifest.json, seed_layout.json, table.txt")
    parser.add_argument("--metrics", default=",".join(SEED_METRICS), help="comma-separated metrics (default: the six)")
    parser.add_argument("--windows", type=_int_list, default=[0, 1, 2], help="retrieval windows (default 0,1,2)")
    parser.add_argument("--top-k", type=at_least_one, default=3, help="source sentences retrieved per summary sentence")
    parser.add_argument(
        "--perturbations",
        default=None,
        help="comma-separated tests or groups; default: meaning-preserving with a rewriter, else "
        "added_source_text; 'none' for the window table only",
    )
    parser.add_argument("--perturbation-window", type=_non_negative, default=1, help="window for perturbed texts")
    parser.add_argument("--limit", type=at_least_one, default=None, help="use only the first N rows")
    parser.add_argument("--seed", type=int, default=0, help="seed of the added-source draw and the rewriter")
    parser.add_argument(
        "--embedder",
        choices=["auto", "tfidf"],
        default="auto",
        help="sentence embedder for retrieval: auto (MiniLM, else TF-IDF with a warning) or tfidf",
    )
    parser.add_argument(
        "--weights-dir",
        default=os.environ.get("METRICS_WEIGHTS_DIR"),
        help="folder of the metrics' weights (env METRICS_WEIGHTS_DIR; docs/metrics.md)",
    )
    parser.add_argument(
        "--device",
        default=os.environ.get("METRICS_DEVICE", "auto"),
        help="auto | cpu | mps | cuda | cuda:N (env METRICS_DEVICE)",
    )
    parser.add_argument(
        "--batch-size",
        type=at_least_one,
        default=int(os.environ.get("METRICS_BATCH_SIZE", "16")),
        help="pairs per forward pass (env METRICS_BATCH_SIZE)",
    )
    parser.add_argument(
        "--llm-base-url",
        default=os.environ.get("STRESS_LLM_BASE_URL"),
        help="OpenAI-compatible server for the LLM rewrites (env STRESS_LLM_BASE_URL)",
    )
    parser.add_argument(
        "--llm-model", default=os.environ.get("STRESS_LLM_MODEL"), help="rewriter model (env STRESS_LLM_MODEL)"
    )
    parser.add_argument(
        "--llm-api-key-env", default="STRESS_LLM_API_KEY", help="variable holding the rewriter's API key"
    )
    if defaults:
        parser.set_defaults(**defaults)
    return parser  # fmt: skip


def _rows(args: argparse.Namespace) -> tuple[list[dict[str, Any]], str]:
    if args.dataset == "squality":
        return squality_rows(args.limit), str(shared_data_dir() / "squality" / "v1-3_txt_test.jsonl")
    from scoring.stress.cli import load_rows  # scipy and the openai client (scoring.stress.runner)

    return load_rows(args.input, args.limit), str(args.input)


def main(
    argv: Sequence[str] | None = None,
    *,
    backend: Any = None,
    defaults: Mapping[str, Any] | None = None,
    prog: str = "python -m scoring.seed_layout",
) -> int:
    """Run the command; returns the exit status (0 done, 2 bad usage or input)."""
    args = build_parser(prog, defaults=defaults).parse_args(list(argv) if argv is not None else None)
    problem = out_dir_problem(args.out)
    if problem:
        print(f"error: --out: {problem}", file=sys.stderr)
        return 2
    try:
        hf_models.configure(weights_dir=args.weights_dir, device=args.device, batch_size=args.batch_size)
    except ValueError as exc:
        print(f"error: --device/--batch-size: {exc}", file=sys.stderr)
        return 2
    judge = None
    if args.llm_base_url or args.llm_model:
        if not (args.llm_base_url and args.llm_model):
            print("error: give both --llm-base-url and --llm-model for the LLM rewriter", file=sys.stderr)
            return 2
        from modelserver import ChatConfig  # the openai client, only for an LLM rewriter

        judge = ChatConfig(
            base_url=args.llm_base_url, model=args.llm_model, api_key=os.environ.get(args.llm_api_key_env, "EMPTY")
        )
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    perturbations = None
    if args.perturbations is not None:
        perturbations = (
            []
            if args.perturbations.strip() == "none"
            else [p.strip() for p in args.perturbations.split(",") if p.strip()]
        )
    try:
        rows, input_name = _rows(args)
        result = run_seed_layout(
            rows,
            metrics,
            windows=args.windows,
            top_k=args.top_k,
            perturbations=perturbations,
            perturbation_window=args.perturbation_window,
            seed=args.seed,
            judge_config=judge,
            cache_dir=args.out / "llm-cache",
            embedder=TfidfEmbedder() if args.embedder == "tfidf" else None,
            backend=backend,
            input_name=input_name,
        )
    except StressError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    table = result.table()
    (args.out / "manifest.json").write_text(json.dumps(result.manifest, indent=2, ensure_ascii=False), encoding="utf-8")
    (args.out / "seed_layout.json").write_text(
        json.dumps(result.to_dict(), indent=2, ensure_ascii=False), encoding="utf-8"
    )
    (args.out / "table.txt").write_text(table + "\n", encoding="utf-8")
    print(table)
    warning = result.manifest["embedder"].get("warning")
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"\nwritten: {args.out / 'table.txt'}, seed_layout.json, manifest.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
