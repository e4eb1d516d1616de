"""File-mode analysis without a database: a comparison table in, report and tables out.

    python -m analysis.cli --comparisons comparisons.parquet --out out/ [--seed N] [--resamples N]

``main(argv)`` returns an exit status and is reused by ``manage.py analyze``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import pandas as pd

from analysis.exports import export_comparisons, neutralize_frame, read_comparisons
from analysis.legacy import legacy_comparison_table, parse_legacy_export
from analysis.report import write_report
from analysis.stats import AnalysisConfig, AnalysisError, AnalysisReport, analyze
from analysis.stats.config import DEFAULT_RESAMPLES, DEFAULT_SEED


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
    parser.add_argument("--no-export", action="store_true", help="do not re-export the comparison table")
    return parser


def load_table(path: Path) -> pd.DataFrame:
    if path.suffix.lower() == ".zip":
        return legacy_comparison_table(parse_legacy_export(path), study=path.stem)
    return read_comparisons(path)


def load_config(args: argparse.Namespace) -> AnalysisConfig:
    settings: dict[str, object] = {}
    if args.config is not None:
        settings.update(json.loads(args.config.read_text(encoding="utf-8")))
    if args.seed is not None:
        settings["seed"] = args.seed
    if args.resamples is not None:
        settings["n_resamples"] = args.resamples
    if args.threshold_sweep is not None:
        settings["threshold_sweep_points"] = args.threshold_sweep
    return AnalysisConfig.from_dict(settings)


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    neutralize_frame(frame).to_csv(path, index=False, lineterminator="\n")


def write_tables(report: AnalysisReport, out_dir: Path) -> list[Path]:
    """One CSV per statistic, for spreadsheets and papers."""
    tables_dir = out_dir / "tables"
    tables_dir.mkdir(parents=True, exist_ok=True)
    frames: dict[str, pd.DataFrame] = {
        "win_rates": report.win_rates.to_frame(),
        "neither_rates": report.win_rates.neither_frame(),
        "annotators": pd.DataFrame([a.to_dict() for a in report.annotators]),
        "page_times": pd.DataFrame([p.to_dict() for p in report.page_times]),
    }
    if report.regression is not None:
        frames["regression"] = report.regression.to_frame()
    if report.agreement is not None:
        frames["agreement"] = report.agreement.to_frame()
        frames["agreement_families"] = pd.DataFrame([f.to_dict() for f in report.agreement.families])
    if report.threshold_sweeps:
        frames["threshold_sweeps"] = pd.DataFrame([s.to_dict() for s in report.threshold_sweeps])
    if report.bradley_terry is not None:
        frames["bradley_terry"] = report.bradley_terry.to_frame()
    paths = []
    for name, frame in frames.items():
        path = tables_dir / f"{name}.csv"
        _write_csv(frame, path)
        paths.append(path)
    return paths


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    args = build_parser().parse_args(argv)
    started = time.perf_counter()
    try:
        config = load_config(args)
        table = load_table(args.comparisons)
        report = analyze(table, config=config)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=err)
        return 2
    except (AnalysisError, ValueError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=err)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    paths = write_report(report, args.out, title=args.title)
    tables = write_tables(report, args.out)
    if not args.no_export:
        export_comparisons(
            table,
            args.out,
            study=args.study,
            filters={"source": args.comparisons.name},
            seed=config.seed,
        )
    p = report.provenance
    print(
        f"analysed {p.n_rows} comparisons from {p.n_annotators} annotators in {time.perf_counter() - started:.1f}s; "
        f"wrote {paths['json']}, {paths['html']} and {len(tables)} tables in {args.out / 'tables'}",
        file=out,
    )
    for line in report_messages(report):
        print(line, file=out)
    return 0


def report_messages(report: AnalysisReport) -> list[str]:
    """Warnings, infinite Bradley-Terry strengths and notes, one line each, for the command line."""
    lines = [f"warning: {w}" for w in report.warnings]
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
