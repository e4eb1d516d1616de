"""The service and selector modules stay layered: a module imports only the ones below it, so no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import annotation

ROOT = Path(annotation.__file__).parent
# Bottom up, as annotation/services/__init__.py lists them.
# (The study's own services, audit, study, invitation and membership, are studies/'s: tests/studies/test_layering.py.)
SERVICE_LAYERS = [
    "participation",
    "quality",
    "persona",
    "tally",
    "tournament",
    "generation",
    "query",
    "prewritten",
]


def _module_level_imports(path: Path) -> set[str]:
    """Modules imported at module level (a function-body import is a deliberate, commented exception)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _modules(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).glob("*.py") if p.name != "__init__.py")


def test_every_service_module_is_in_a_layer():
    assert sorted(p.stem for p in _modules("services")) == sorted(SERVICE_LAYERS)


def test_a_service_imports_only_the_services_below_it():
    for path in _modules("services"):
        below = SERVICE_LAYERS[: SERVICE_LAYERS.index(path.stem)]
        imported = {
            name.split(".")[2]
            for name in _module_level_imports(path)
            if name.startswith("annotation.services.") and name.count(".") == 2
        }
        assert imported <= set(below), f"{path.stem} imports {sorted(imported - set(below))}"


def test_selectors_import_no_service():
    for path in _modules("selectors"):
        imported = _module_level_imports(path)
        assert not {name for name in imported if name.startswith("annotation.services")}, path.stem


def test_the_packages_re_export_nothing():
    for package in ("services", "selectors"):
        tree = ast.parse((ROOT / package / "__init__.py").read_text())
        assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr), f"annotation.{package} is a docstring only"
