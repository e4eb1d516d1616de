"""``python -m analysis.cli import-judgments``: an outside judgments file in, the comparison table out.

    python -m analysis.cli import-judgments --kind best-worst judgments.csv --out DIR [--columns best=Best,...]
        [--drop-contradictions] [--study NAME] [--formats csv,jsonl,parquet]

``main(argv)`` returns an exit status (2: refused, the message names the rows and fields) and is reused by
``manage.py import_judgments``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from analysis.exports import FORMATS, export_comparisons
from analysis.importers import KINDS, ImportProblem, import_judgments, parse_columns
from kernel.cli import out_dir_problem


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m analysis.cli import-judgments",
        description="Convert pairwise, best-worst or ranking judgments (.csv or .jsonl) to the comparison table.",
    )
    parser.add_argument("file", type=Path, help="judgments file: .csv or .jsonl")
    parser.add_argument("--kind", required=True, choices=KINDS)
    parser.add_argument("--out", required=True, type=Path, help="output directory (created if missing)")
    parser.add_argument(
        "--columns", default=None, help="field=column pairs naming the file's columns, e.g. best=Best,worst=Worst"
    )
    parser.add_argument(
        "--drop-contradictions",
        action="store_true",
        help="leave out judgments that contradict themselves (listed in the manifest) instead of refusing the file",
    )
    parser.add_argument("--study", default=None, help="study name for the table and manifest (default: file stem)")
    parser.add_argument("--formats", default=",".join(FORMATS), help=f"comma-separated among {', '.join(FORMATS)}")
    return parser


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    args = build_parser().parse_args(argv)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        print(f"error: --formats: {', '.join(unknown) or 'none given'} (expected {', '.join(FORMATS)})", file=err)
        return 2
    problem = out_dir_problem(args.out)
    if problem:
        print(f"error: --out: {problem}", file=err)
        return 2
    try:
        columns = parse_columns(args.columns, args.kind)
        imported = import_judgments(
            args.file, kind=args.kind, columns=columns, drop_contradictions=args.drop_contradictions, study=args.study
        )
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=err)
        return 2
    except ImportProblem as exc:
        print(f"error: {exc}", file=err)
        return 2
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        manifest = export_comparisons(
            imported.table,
            args.out,
            formats=formats,
            study=args.study or args.file.stem,
            filters={"source": args.file.name, "kind": args.kind},
        )
        path = args.out / "comparisons.manifest.json"
        data = json.loads(path.read_text(encoding="utf-8"))
        data["import"] = imported.manifest_entry()
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as exc:
        print(f"error: --out: {exc}", file=err)
        return 2
    print(
        f"imported {imported.n_judgments} {args.kind} judgments as {imported.n_pairs} comparisons; "
        f"wrote {', '.join(Path(f.path).name for f in manifest.files)} and {path.name} in {args.out}",
        file=out,
    )
    for p in imported.dropped:
        print(f"dropped: {p.sentence()}", file=out)
    return 0
