"""No import cycle among the project's modules: tasks import services, services send tasks by name
(kernel.tasks.enqueue_on_commit), and no import hides inside a function to hold a cycle open
(docs/architecture.md, "Rooms"). import-linter's acyclic_siblings contract (pyproject.toml) checks the same
of packages; this checks single modules, package __init__ files included, and names the cycle it finds."""

from __future__ import annotations

import importlib.util

import grimp

ROOMS = ("config", "analysis", "scoring", "studies", "annotation", "generation", "corpus", "modelserver", "kernel")


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """One shortest cycle through each direct import that closes one, as the modules in import order with the
    first repeated at the end; a cycle is reported once whichever of its imports finds it."""
    found: dict[frozenset[str], list[str]] = {}
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back:
                found.setdefault(frozenset(back), [importer, *back])
    return sorted(found.values())


def project_graph() -> grimp.ImportGraph:
    rooms = [room for room in ROOMS if importlib.util.find_spec(room) is not None]
    return grimp.build_graph(*rooms, cache_dir=None)


def test_no_module_imports_itself_through_others() -> None:
    cycles = import_cycles(project_graph())
    assert not cycles, "import cycles (each module imports the next):\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_a_cycle_is_found_and_named() -> None:
    """The search itself, on a graph with one cycle held by an import inside a function (grimp counts it)."""
    graph = grimp.ImportGraph()
    graph.add_import(importer="app.services", imported="app.models")
    graph.add_import(importer="app.tasks", imported="app.services")
    graph.add_import(importer="app.services", imported="app.tasks")  # the send, imported at call time
    assert import_cycles(graph) == [["app.services", "app.tasks", "app.services"]]
