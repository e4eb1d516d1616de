"""Command line for metric stress tests, usable without a database.

    python -m scoring.stress.cli --input rows.jsonl --tests distractor,incremental \\
        --metrics rouge1,chrf --out DIR

Each input line is a JSON object with "id" and "summary", and as the metrics need them
"source", "reference", "query" and "persona". `main(argv)` returns the exit status, so that
`manage.py stress_test` can reuse it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernel.cli import at_least_one, out_dir_problem
from kernel.jsonl import JsonlError, read_jsonl
from modelserver import ChatConfig
from modelserver.client import configure_max_response_bytes_from_env
from scoring.core.longdoc import embedder_warning
from scoring.stress.perturb import TESTS, StressError
from scoring.stress.runner import CoreMetrics, resolve_metrics, resolve_tests, run_stress
from scoring.stress.types import MetricBackend

__all__ = ["build_parser", "load_rows", "main"]


def build_parser(prog: str = "python -m scoring.stress.cli") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Perturb summaries and check that metrics move the expected way (seeds 002 and 003).",
    )
    parser.add_argument("--input", required=True, type=Path, help="JSONL file of rows (id, summary, source, ...)")
    parser.add_argument(
        "--tests",
        required=True,
        help=f"comma-separated tests or groups (all, paper, meaning-preserving, deterministic, llm); tests: {', '.join(TESTS)}",
    )
    parser.add_argument("--metrics", required=True, help="comma-separated metric names, or 'offline' / 'all'")
    parser.add_argument("--out", required=True, type=Path, help="directory for report.html, report.json and CSVs")
    parser.add_argument("--seed", type=int, default=0, help="seed for distractor draws and the rewriter (default 0)")
    parser.add_argument("--limit", type=at_least_one, default=None, help="use only the first N rows")
    parser.add_argument(
        "--llm-base-url",
        default=os.environ.get("STRESS_LLM_BASE_URL"),
        help="OpenAI-compatible server that writes the LLM perturbations (env STRESS_LLM_BASE_URL)",
    )
    parser.add_argument(
        "--llm-model", default=os.environ.get("STRESS_LLM_MODEL"), help="rewriter model name (env STRESS_LLM_MODEL)"
    )
    parser.add_argument(
        "--llm-api-key-env",
        default="STRESS_LLM_API_KEY",
        help="name of the environment variable holding the API key (default STRESS_LLM_API_KEY)",
    )
    parser.add_argument("--cache-dir", type=Path, default=None, help="LLM cache directory (default OUT/llm-cache)")
    parser.add_argument("--progress", action="store_true", help="show progress bars")
    return parser  # fmt: skip


def load_rows(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """Read a JSONL file of rows, naming the line of any malformed one."""
    if not path.is_file():
        raise StressError(f"input file {path} does not exist")
    rows: list[dict[str, Any]] = []
    try:
        for number, row in read_jsonl(path):
            if "id" not in row or "summary" not in row:
                raise JsonlError(path, number, "each line must be an object with 'id' and 'summary'")
            rows.append(row)
            if limit is not None and len(rows) >= limit:
                break
    except JsonlError as exc:
        # "<file>:N:" is this command's location style (tests/scoring/stress/test_runner.py pins it).
        raise StressError(f"{exc.path}:{exc.line}: {exc.problem}" if exc.line else str(exc)) from exc
    if not rows:
        raise StressError(f"input file {path} has no rows")
    return rows


def _option_names(text: str) -> list[str]:
    """The names in a comma-separated option, as `python -m scoring.cli --metrics` reads them: spaces around
    each name removed, empty ones (a trailing or doubled comma) dropped."""
    return [name.strip() for name in text.split(",") if name.strip()]


def main(argv: Sequence[str] | None = None, *, backend: MetricBackend | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = out_dir_problem(args.out)
    if problem:
        print(f"error: --out: {problem}", file=sys.stderr)
        return 2
    judge: ChatConfig | None = None
    if args.llm_base_url or args.llm_model:
        if not (args.llm_base_url and args.llm_model):
            print("error: give both --llm-base-url and --llm-model for the LLM rewriter", file=sys.stderr)
            return 2
        try:  # the cap the platform's settings read, for the rewriter called from here too
            configure_max_response_bytes_from_env()
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        judge = ChatConfig(
            base_url=args.llm_base_url, model=args.llm_model, api_key=os.environ.get(args.llm_api_key_env, "EMPTY")
        )
    suite = backend or CoreMetrics()
    # Names are checked before the input is read, and the message says which option held the wrong one.
    try:
        tests = resolve_tests(_option_names(args.tests))
    except StressError as exc:
        print(f"error: --tests {args.tests!r}: {exc}", file=sys.stderr)
        return 2
    try:
        metrics = resolve_metrics(_option_names(args.metrics), suite)
    except StressError as exc:
        print(f"error: --metrics {args.metrics!r}: {exc}", file=sys.stderr)
        return 2
    try:
        rows = load_rows(args.input, args.limit)
        report = run_stress(
            rows,
            tests,
            metrics,
            seed=args.seed,
            judge_config=judge,
            out_dir=args.out,
            progress=args.progress,
            cache_dir=args.cache_dir,
            backend=suite,
        )
    except StressError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report.summary())
    if report.long_document is not None:
        print(f"\nlong documents: sentence embedder {report.long_document.embedder}")
        warning = embedder_warning(report.long_document.embedder)
        if warning:
            print(f"warning: {warning}", file=sys.stderr)
    print(f"\nreport: {report.files.get('html')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
