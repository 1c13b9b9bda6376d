"""The packages import each other without cycles, and the format core stands on its own.

The graph is read statically (:mod:`tests.support.import_graph`): module-level and function-level imports
both count, so a cycle cannot hide behind a deferred import.
"""

from __future__ import annotations

from converters import ROOT
from tests.support.import_graph import all_cycles, import_graph

PACKAGES = ("ninfer_core", "converters")


def test_the_graph_sees_module_and_function_level_imports():
    graph = import_graph(ROOT, PACKAGES)
    assert "ninfer_core.codecs.base" in graph["ninfer_core.codecs"]  # ``from .base import …`` at module level
    assert len(graph) > 100 and sum(len(d) for d in graph.values()) > 300


def test_no_import_cycles():
    cycles = all_cycles(import_graph(ROOT, PACKAGES))
    assert not cycles, "import cycles:\n" + "\n".join("  " + " -> ".join(c) for c in cycles)


def test_ninfer_core_imports_nothing_from_converters():
    graph = import_graph(ROOT, PACKAGES)
    leaks = sorted(f"{m} -> {d}" for m, deps in graph.items() if m.startswith("ninfer_core")
                   for d in deps if d.split(".")[0] == "converters")
    assert not leaks, "ninfer_core imports converters:\n" + "\n".join(leaks)
