"""File-mode analysis without a database: a comparison table in, report and tables out.

    python -m analysis.cli --comparisons comparisons.parquet --out out/ [--seed N] [--resamples N]
    python -m analysis.cli import-judgments --kind best-worst FILE --out DIR   (analysis.import_cli)

``main(argv)`` returns an exit status and is reused by ``manage.py analyze``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import pandas as pd

from analysis import import_cli
from analysis.exports import FORMATS, read_comparisons
from analysis.legacy import legacy_comparison_table, parse_legacy_export
from analysis.report.bundle import write_analysis
from analysis.stats import AnalysisConfig, AnalysisError, analyze
from analysis.stats.analyze import AnalysisReport
from analysis.stats.config import DEFAULT_RESAMPLES, DEFAULT_SEED
from analysis.stats.table import check_rows
from kernel.cli import out_dir_problem


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m analysis.cli",
        description="Analyse a comparison table (CSV, JSONL, Parquet or a legacy export zip).",
    )
    parser.add_argument(
        "--comparisons", required=True, type=Path, help="comparison table: .csv, .jsonl, .parquet, or legacy .zip"
    )
    parser.add_argument("--out", required=True, type=Path, help="output directory (created if missing)")
    parser.add_argument("--seed", type=int, default=None, help=f"bootstrap seed (default {DEFAULT_SEED})")
    parser.add_argument(
        "--resamples", type=int, default=None, help=f"bootstrap resamples (default {DEFAULT_RESAMPLES})"
    )
    parser.add_argument("--config", type=Path, help="JSON file of AnalysisConfig settings (thresholds, families, ...)")
    parser.add_argument("--threshold-sweep", type=int, default=None, help="alpha at N thresholds per metric")
    parser.add_argument("--title", default="Human evaluation analysis")
    parser.add_argument("--study", default=None, help="study name for the export manifest")
    export = parser.add_mutually_exclusive_group()
    export.add_argument(
        "--export",
        action="store_true",
        help="also re-export the comparison table (CSV, JSONL, Parquet and manifest) when the input is a table "
        "file; a legacy .zip is always exported (its table is new)",
    )
    export.add_argument("--no-export", action="store_true", help="never write the comparison table")
    return parser


def load_table(path: Path) -> pd.DataFrame:
    if path.suffix.lower() == ".zip":
        return legacy_comparison_table(parse_legacy_export(path), study=path.stem)
    return read_comparisons(path)


class ConfigError(ValueError):
    """A problem with the settings file or a flag; its message names the file or the setting."""


def read_settings(path: Path) -> dict[str, Any]:
    """The settings file's object, checked on its own so that its errors name it (not the table)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must be a JSON object of AnalysisConfig settings")
    try:
        AnalysisConfig.from_dict(data)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    return data


def load_config(args: argparse.Namespace) -> AnalysisConfig:
    settings: dict[str, Any] = {}
    if args.config is not None:
        settings.update(read_settings(args.config))
    if args.seed is not None:
        settings["seed"] = args.seed
    if args.resamples is not None:
        settings["n_resamples"] = args.resamples
    if args.threshold_sweep is not None:
        settings["threshold_sweep_points"] = args.threshold_sweep
    try:
        return AnalysisConfig.from_dict(settings)
    except ValueError as exc:  # the file's settings passed above: a flag's value is wrong
        raise ConfigError(str(exc)) from exc


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["import-judgments"]:
        return import_cli.main(argv[1:], stdout=out, stderr=err)
    args = build_parser().parse_args(argv)
    started = time.perf_counter()
    problem = out_dir_problem(args.out)
    if problem:
        print(f"error: --out: {problem}", file=err)
        return 2
    try:
        config = load_config(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=err)
        return 2
    try:
        table = load_table(args.comparisons)
        if args.comparisons.suffix.lower() != ".zip":
            # A table from outside: every row must be one the platform could have recorded (a legacy export is
            # checked by its own reader).
            check_rows(table, conditions=(config.persona_condition, config.generic_condition))
        report = analyze(table, config=config)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=err)
        return 2
    except (AnalysisError, ValueError, json.JSONDecodeError) as exc:
        print(f"error: {args.comparisons}: {exc}", file=err)
        return 2
    try:
        outputs = write_analysis(
            report,
            table,
            args.out,
            title=args.title,
            study=args.study,
            filters={"source": args.comparisons.name},
            export_formats=FORMATS if wants_export(args) else (),
        )
    except OSError as exc:
        print(f"error: --out: {exc}", file=err)
        return 2
    p = report.provenance
    print(
        f"analysed {p.n_rows} comparisons from {p.n_annotators} annotators in {time.perf_counter() - started:.1f}s; "
        f"wrote {outputs.json}, {outputs.html} and {len(outputs.tables)} tables in {args.out / 'tables'}",
        file=out,
    )
    for line in report_messages(report):
        print(line, file=out)
    return 0


def wants_export(args: argparse.Namespace) -> bool:
    """Whether to write the comparison table beside the report. A table file given as input already is the
    table (its checksum is in the report's provenance), so it is re-exported only with ``--export``; the
    table built from a legacy export is written unless ``--no-export``."""
    if args.no_export:
        return False
    return bool(args.export) or args.comparisons.suffix.lower() == ".zip"


def report_messages(report: AnalysisReport) -> list[str]:
    """Warnings, infinite Bradley-Terry strengths and notes, one line each, for the command line."""
    lines = [f"warning: {w}" for w in report.warnings]
    lines.append(f"estimand ({report.estimand.design} design): {report.estimand.sentence}")
    bt = report.bradley_terry
    if bt is not None:
        for s in bt.systems:
            words = s.describe_unbounded(bt.n_resamples)
            if words:
                lines.append(f"Bradley-Terry: {s.system}: {words}")
    lines.extend(f"note: {note}" for note in report.notes)
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
