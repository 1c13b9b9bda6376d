"""The static import graph of the project's packages, read with ``ast`` (nothing is imported).

Every ``import`` and ``from … import`` counts, at module level and inside functions alike: a
function-level import is still a dependency, only a deferred one, and a cycle hidden behind it is still
a cycle a reader has to untangle. ``from pkg import name`` depends on
``pkg.name`` when that is a module of the project, else on ``pkg``; relative imports are resolved against
the importing module. Importing ``a.b`` does not count as importing the package ``a`` (Python runs
``a/__init__`` first, but a package that re-exports its modules would otherwise form a cycle with each).
"""

from __future__ import annotations

import ast
from pathlib import Path


def module_names(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """``dotted name -> file`` for every ``.py`` file under the given top-level packages of ``root``."""
    out: dict[str, Path] = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a project module (None when it is outside the project)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The dotted names an import statement names (``from a import b`` names ``a.b``: the module ``a.b``
    when there is one, else the name ``b`` of ``a``; parent packages do not count)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    return [f"{prefix}.{a.name}" if a.name != "*" else prefix for a in node.names]


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """``module -> modules of the project it imports`` (a package's own ``__init__`` is the package)."""
    modules = module_names(root, packages)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        deps: set[str] = set()
        for node in ast.walk(tree):
            for target in _imported(node, name, is_package):
                dep = _resolve(target, modules)
                if dep is not None and dep != name:
                    deps.add(dep)
        graph[name] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, …, a]``, or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def all_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One representative cycle per strongly connected component with more than one module."""
    out = []
    seen: set[str] = set()
    while True:
        rest = {m: {d for d in deps if d not in seen} for m, deps in graph.items() if m not in seen}
        cycle = find_cycle(rest)
        if cycle is None:
            return out
        out.append(cycle)
        seen.update(cycle[:-1])
