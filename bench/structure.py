"""Count what issue 29 asks to shrink: lines per room, import cycles, function-body imports, environment reads,
``getattr(settings, ...)`` defaults and raw SQL sites.

    .venv/bin/python bench/structure.py            # the table for the working tree
    .venv/bin/python bench/structure.py --list     # and every site, file:line, to work from

Counts are of the project's own Python (migrations, tests and bench excluded). A cycle is a strongly connected
set of modules of one app in the import graph with every import counted, function-body ones included (grimp,
which import-linter uses): a cycle held open only by an import inside a function is still a cycle.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

import grimp
import networkx

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ["config", "analysis", "scoring", "studies", "annotation", "generation", "corpus", "modelserver", "kernel"]
SETTINGS_DIR = ROOT / "config" / "settings"
# The settings' reader of the environment and of .env, which the settings and the entry points call.
SETTINGS_READER = ROOT / "config" / "environment.py"


def _files(room: str) -> list[Path]:
    base = ROOT / room
    if not base.is_dir():
        return []
    return sorted(p for p in base.rglob("*.py") if "migrations" not in p.parts)


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _function_body_imports(tree: ast.AST, lines: list[str]) -> list[tuple[int, bool]]:
    """(line, commented) of each import inside a function; commented: a comment on its line or the one above."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, (ast.Import, ast.ImportFrom)) and inner is not node:
                here = lines[inner.lineno - 1]
                above = lines[inner.lineno - 2] if inner.lineno >= 2 else ""
                commented = "#" in here or above.strip().startswith("#")
                found.append((inner.lineno, commented))
    # An import in a nested function is inside its outer function too: keep each once.
    return sorted(set(found))


ENV = re.compile(r"\bos\.(environ|getenv)\b")
GETATTR_DEFAULT = re.compile(r"getattr\(\s*settings\s*,\s*[\"'][A-Z0-9_]+[\"']\s*,")
RAW_SQL = re.compile(r"\bcursor\.execute(many)?\(|\.raw\(|\bRawSQL\(")


def measure() -> tuple[dict, dict[str, list[str]]]:
    counts: dict = {"lines": {}}
    sites: dict[str, list[str]] = {"function-body imports": [], "uncommented": [], "env": [], "getattr": [], "sql": []}
    functions_with_imports = 0
    for room in ROOMS:
        total = 0
        for path in _files(room):
            text = path.read_text()
            lines = text.splitlines()
            total += len(lines)
            rel = str(path.relative_to(ROOT))
            tree = ast.parse(text)
            body = _function_body_imports(tree, lines)
            if body:
                functions_with_imports += len(
                    {
                        n.lineno
                        for n in ast.walk(tree)
                        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and any(isinstance(i, (ast.Import, ast.ImportFrom)) for i in ast.walk(n) if i is not n)
                    }
                )
            for line, commented in body:
                sites["function-body imports"].append(f"{rel}:{line}")
                if not commented:
                    sites["uncommented"].append(f"{rel}:{line}")
            in_settings = SETTINGS_DIR in path.parents or path == SETTINGS_READER
            for number, line in enumerate(lines, 1):
                code = line.split("#", 1)[0]
                if ENV.search(code) and not in_settings:
                    sites["env"].append(f"{rel}:{number}")
                if GETATTR_DEFAULT.search(code):
                    sites["getattr"].append(f"{rel}:{number}")
                if RAW_SQL.search(code):
                    sites["sql"].append(f"{rel}:{number}")
        if total:
            counts["lines"][room] = total
    counts["functions with imports"] = functions_with_imports
    counts["cycles"] = _cycles()
    return counts, sites


def _cycles() -> list[list[str]]:
    sys.path.insert(0, str(ROOT))
    packages = [room for room in ROOMS if (ROOT / room / "__init__.py").exists()]
    graph = grimp.build_graph(*packages, cache_dir=None)
    directed = networkx.DiGraph()
    for module in graph.modules:
        if ".migrations" in module:
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            if ".migrations" not in imported:
                directed.add_edge(module, imported)
    cycles = []
    for component in networkx.strongly_connected_components(directed):
        if len(component) > 1:
            cycles.append(sorted(component))
    return sorted(cycles)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print every site as file:line")
    args = parser.parse_args()
    counts, sites = measure()
    total = sum(counts["lines"].values())
    print("| room | lines | share |")
    print("| --- | ---: | ---: |")
    for room, lines in counts["lines"].items():
        print(f"| {room} | {lines:,} | {lines / total:.1%} |")
    print(f"| all | {total:,} | |")
    print()
    print("| measure | count |")
    print("| --- | ---: |")
    print(f"| import cycles (strongly connected module sets) | {len(counts['cycles'])} |")
    print(f"| modules in a cycle | {sum(len(c) for c in counts['cycles'])} |")
    print(f"| function-body imports | {len(sites['function-body imports'])} |")
    print(f"| functions holding them | {counts['functions with imports']} |")
    print(f"| of them without a comment | {len(sites['uncommented'])} |")
    print(f"| os.environ / os.getenv outside config/settings | {len(sites['env'])} |")
    print(f"| getattr(settings, NAME, default) | {len(sites['getattr'])} |")
    print(f"| raw SQL sites (cursor.execute, .raw, RawSQL) | {len(sites['sql'])} |")
    if args.list:
        for cycle in counts["cycles"]:
            print("\ncycle:", " ".join(cycle))
        for name, where in sites.items():
            print(f"\n{name}:")
            for site in where:
                print("  ", site)


if __name__ == "__main__":
    main()
