"""Mutation score of the pure cores (mutmut): how many small changes to a module its own fast tests notice.

    .venv/bin/python bench/mutation.py                          # every module below, one after another
    .venv/bin/python bench/mutation.py --module alpha --module bootstrap
    .venv/bin/python bench/mutation.py --module alpha --survivors   # and each surviving mutant's diff

Each module is run on its own, against its own unit tests only (no database suite), in a copy of the working
tree under a temporary folder, so the checkout is never mutated and a run can go on while you edit. mutmut
makes every mutant of the module's functions (an operator, a constant, a comparison, a string, an argument
dropped), then runs, per mutant, the tests that call the mutated function; a mutant is killed when one fails.

Score raw = killed (and timed out) / mutants. Score after equivalents = the same with the mutants listed in
bench/mutation_equivalents.txt left out of the denominator: mutants that change the code but not what any
caller can observe, each with a one-line reason (e.g. ``x[..., :, None]`` for ``x[:, None]`` on a 1-D array).
A listed mutant that the tests kill is reported (the list is stale). Target: 90 % or more after equivalents.

A whole run takes some minutes per module (about 1-2 mutants a second with two workers on a busy 2-core
host); ``--jobs`` sets the workers (default 2).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENTS = ROOT / "bench" / "mutation_equivalents.txt"
# Every package the tests import (conftest imports Django apps), copied into mutmut's mutants/ folder.
PACKAGES = ["analysis", "scoring", "kernel", "annotation", "config", "corpus", "modelserver"]


@dataclass(frozen=True)
class Module:
    name: str
    source: str
    tests: tuple[str, ...]


MODULES = [
    Module("abstractiveness", "scoring/core/abstractiveness.py", ("tests/scoring/test_abstractiveness.py",)),
    Module(
        "alpha",
        "analysis/stats/alpha.py",
        ("tests/analysis/test_alpha.py", "tests/analysis/test_agreement.py", "tests/analysis/test_agreement_levels.py"),
    ),
    Module("bootstrap", "analysis/stats/bootstrap.py", ("tests/analysis/test_bootstrap.py",)),
    Module("multiplicity", "analysis/stats/multiplicity.py", ("tests/analysis/test_multiplicity.py",)),
]

# mutmut's exit codes per mutant (mutmut/stats.py), grouped as this table counts them.
KILLED = {1, 3}
SURVIVED = {0}
TIMEOUT = {36, -24, 24, 152, 255}
NO_TESTS = {5, 33}


def equivalents() -> dict[str, str]:
    """Mutant id -> reason, from bench/mutation_equivalents.txt (``id  reason``; ``#`` starts a comment)."""
    found: dict[str, str] = {}
    if not EQUIVALENTS.exists():
        return found
    for line in EQUIVALENTS.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, reason = line.partition(" ")
        found[name] = reason.strip()
    return found


def copy_tree(target: Path) -> None:
    """The working tree's files (tracked and new, not ignored), as they are now."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for raw in listed:
        if not raw:
            continue
        rel = Path(raw.decode())
        if rel.parts[0] not in (*PACKAGES, "tests", "pyproject.toml"):
            continue
        source = ROOT / rel
        if not source.is_file():
            continue  # deleted in the working tree
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target / rel)


def mutmut_config(module: Module) -> str:
    def toml_list(items: list[str] | tuple[str, ...]) -> str:
        return "[" + ", ".join(json.dumps(i) for i in items) + "]"

    return (
        "\n[tool.mutmut]\n"
        f"source_paths = {toml_list(PACKAGES)}\n"
        f"only_mutate = {toml_list([module.source])}\n"
        f"pytest_add_cli_args_test_selection = {toml_list([t for t in module.tests if (ROOT / t).exists()])}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-p", "no:xdist"]\n'
    )


def run_module(module: Module, jobs: int, work: Path, log: Path) -> dict[str, int]:
    """mutmut run in a fresh copy; returns mutant id -> exit code."""
    folder = work / module.name
    folder.mkdir()
    copy_tree(folder)
    with (folder / "pyproject.toml").open("a") as f:
        f.write(mutmut_config(module))
    env = dict(os.environ)
    # The copy, not the checkout, must be what the tests import: mutmut puts mutants/ first on sys.path.
    env.pop("PYTHONPATH", None)
    mutmut = Path(sys.executable).with_name("mutmut")
    with log.open("w") as out:
        done = subprocess.run(
            [str(mutmut), "run", "--max-children", str(jobs)], cwd=folder, env=env, stdout=out, stderr=out
        )
    if done.returncode != 0:
        sys.exit(f"bench/mutation.py: mutmut failed for {module.name} (exit {done.returncode}); see {log}")
    meta = folder / "mutants" / (module.source + ".meta")
    found: dict[str, int] = json.loads(meta.read_text())["exit_code_by_key"]
    return found


def survivor_diffs(module: Module, work: Path, names: list[str]) -> str:
    """Each mutant's changed lines, read from mutmut's mutated copy (faster than ``mutmut show`` per mutant)."""
    mutated = (work / module.name / "mutants" / module.source).read_text()
    tree = ast.parse(mutated)
    lines = mutated.splitlines()
    functions: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "__mutmut_" in node.name:
            # Slicing the lines: ast.get_source_segment re-splits the whole file per call (minutes here).
            functions[node.name] = "\n".join(lines[node.lineno - 1 : node.end_lineno])
    shown = []
    for name in names:
        function = name.rsplit(".", 1)[-1]
        stem = function.rsplit("__mutmut_", 1)[0]
        original = functions.get(f"{stem}__mutmut_orig", "").splitlines()
        changed = functions.get(function, "").splitlines()
        lines = [
            line
            for line in difflib.unified_diff(original[1:], changed[1:], lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("---", "+++"))
        ]
        shown.append(f"# {name}\n" + "\n".join(lines))
    return "\n".join(shown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--module", action="append", choices=[m.name for m in MODULES], help="default: all")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default 2)")
    parser.add_argument("--survivors", action="store_true", help="print each surviving mutant's diff")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copies (their path is printed)")
    parser.add_argument(
        "--tabulate", type=Path, metavar="FOLDER", help="only print the table of a run kept with --keep, again"
    )
    args = parser.parse_args()
    chosen = [m for m in MODULES if not args.module or m.name in args.module]
    known = equivalents()
    if args.tabulate:
        chosen = [m for m in chosen if (args.tabulate / m.name / "mutants" / (m.source + ".meta")).exists()]
    work = args.tabulate or Path(tempfile.mkdtemp(prefix="mutation-"))
    rows: list[tuple[str, int, int, int, int, int, int, float, float]] = []
    survivors_by_module: dict[str, list[str]] = {}
    stale: list[str] = []
    try:
        for module in chosen:
            if args.tabulate:
                meta = work / module.name / "mutants" / (module.source + ".meta")
                codes: dict[str, int] = json.loads(meta.read_text())["exit_code_by_key"]
            else:
                print(f"bench/mutation.py: {module.name} ({module.source}) ...", flush=True)
                codes = run_module(module, args.jobs, work, work / f"{module.name}.log")
            killed = sum(1 for c in codes.values() if c in KILLED)
            timeout = sum(1 for c in codes.values() if c in TIMEOUT)
            survivors = sorted((n for n, c in codes.items() if c in SURVIVED or c in NO_TESTS), key=_natural)
            other = sum(1 for c in codes.values() if c is not None) - killed - timeout - len(survivors)
            equivalent = [n for n in survivors if n in known]
            stale += [n for n, c in codes.items() if n in known and c in KILLED | TIMEOUT]
            open_survivors = [n for n in survivors if n not in known]
            survivors_by_module[module.name] = open_survivors
            # Scores over the mutants tested: a run stopped early (--tabulate of a kept copy) leaves some unrun.
            total = len(codes) - sum(1 for c in codes.values() if c is None)
            caught = killed + timeout
            raw = 100.0 * caught / total if total else float("nan")
            net = 100.0 * caught / (total - len(equivalent)) if total > len(equivalent) else float("nan")
            rows.append((module.name, total, killed, len(survivors), timeout, len(equivalent), other, raw, net))
        print()
        header = ("module", "mutants tested", "killed", "survived", "timeout", "equivalent", "other", "raw %", "net %")
        print("| " + " | ".join(header) + " |")
        print("|" + " --- |" * len(header))
        for name, total, killed, surv, tout, eq, other, raw, net in rows:
            print(f"| {name} | {total} | {killed} | {surv} | {tout} | {eq} | {other} | {raw:.1f} | {net:.1f} |")
        if len(rows) > 1:
            total, killed, surv, tout, eq, other = (sum(int(r[i]) for r in rows) for i in range(1, 7))
            raw = 100.0 * (killed + tout) / total
            net = 100.0 * (killed + tout) / (total - eq)
            print(f"| all | {total} | {killed} | {surv} | {tout} | {eq} | {other} | {raw:.1f} | {net:.1f} |")
        print("\nsurvived counts the equivalents; net % leaves them out; other = suspicious or segfault")
        for name, names in survivors_by_module.items():
            if names:
                print(f"\n{name}: {len(names)} surviving, not listed as equivalent:")
                module = next(m for m in chosen if m.name == name)
                if args.survivors:
                    print(survivor_diffs(module, work, names))
                else:
                    print("  " + "\n  ".join(names))
        if stale:
            print("\nlisted as equivalent but killed (remove from bench/mutation_equivalents.txt):")
            print("  " + "\n  ".join(stale))
    finally:
        if args.keep or args.tabulate:
            print(f"\ncopies kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _natural(name: str) -> tuple[str, int]:
    stem, _, number = name.rpartition("_")
    return (stem, int(number) if number.isdigit() else 0)


if __name__ == "__main__":
    main()
