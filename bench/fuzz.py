#!/usr/bin/env python
"""Fuzz benchmark: schemathesis over the whole OpenAPI schema (tests/fuzz/harness.py, the CI test's harness) as
an annotator, a researcher, an admin and nobody, with more cases per operation than CI sends; prints
role | operations | cases | 5xx | off-schema answers | seconds, and the first failing requests. Target: 0 and 0
in every row.
Run from the repository root: `.venv/bin/python bench/fuzz.py` (`--examples 200` for a long run, `--help`).

It runs `tests/fuzz/test_api_fuzz.py` under pytest, so the database is pytest-django's own throwaway copy
(`test_<name>` of --database) with real PostgreSQL, and Celery runs eagerly as in the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=30, help="cases per operation and role (CI: 8; default 30)")
    parser.add_argument(
        "--only", default="", help="comma-separated path fragments: fuzz only operations whose path holds one"
    )
    parser.add_argument("--roles", default="annotator,researcher,admin,anonymous", help="comma-separated roles")
    parser.add_argument(
        "--database",
        default=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench_fuzz"),
        help="PostgreSQL URL; pytest-django creates and drops test_<name>",
    )
    parser.add_argument("--redis", default=os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/14"))
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    report = Path(tempfile.mkdtemp(prefix="bench-fuzz-")) / "report.jsonl"
    env = {
        **os.environ,
        "DATABASE_URL": args.database,
        "CELERY_BROKER_URL": args.redis,
        "FUZZ_EXAMPLES": str(args.examples),
        "FUZZ_ONLY": args.only,
        "FUZZ_REPORT": str(report),
        "PYTHONPATH": str(REPO),
    }
    selected = " or ".join(role for role in args.roles.split(",") if role)
    print(f"{args.examples} cases per operation, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/fuzz/test_api_fuzz.py"]
    completed = subprocess.run([*argv, "-k", selected], cwd=REPO, env=env, check=False)
    rows = [json.loads(line) for line in report.read_text().splitlines()] if report.is_file() else []
    if not rows:
        print("no results: the fuzz test did not run (see pytest's output above)", file=sys.stderr)
        return 1
    print(f"\n{'role':<12}{'operations':>11}{'cases':>8}{'5xx':>6}{'off-schema':>11}{'seconds':>9}")
    keys = ("operations", "cases", "server_errors", "schema_violations")
    for row in rows:
        print(
            f"{row['role']:<12}"
            + "".join(f"{row[k]:>{w}}" for k, w in zip(keys, (11, 8, 6, 11), strict=True))
            + f"{row['seconds']:>9.1f}"
        )
    total = [sum(r[k] for r in rows) for k in keys]
    print(
        f"{'all':<12}"
        + "".join(f"{t:>{w}}" for t, w in zip(total, (11, 8, 6, 11), strict=True))
        + f"{sum(r['seconds'] for r in rows):>9.1f}"
    )
    for row in rows:
        for failure in row["failures"]:
            print(f"  {row['role']}: {failure}")
    return 1 if total[2] or total[3] or completed.returncode else 0


if __name__ == "__main__":
    sys.exit(main())
