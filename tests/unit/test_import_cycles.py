"""The ``routerag`` package is a DAG of modules: no import cycles.

The graph is built statically (``ast`` over ``src/routerag/**/*.py``) and counts every import: at
module level, inside functions (a function-local import hides a cycle from the interpreter, not
from the design) and under ``if TYPE_CHECKING:``. An edge goes to the module an import names
(``from routerag.a import b`` -> ``routerag.a.b`` when that is a module, else ``routerag.a``);
a parent package's ``__init__`` is not counted as a dependency of its submodules' importers.
Cycles are strongly connected components of more than one module (a module importing itself is
ignored). A cycle may be listed in ``ALLOWED`` only with a reason next to it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "routerag"

# frozenset of module names -> why this cycle is acceptable. Keep it empty.
ALLOWED: dict[frozenset[str], str] = {}


def modules(src: Path = SRC, package: str = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is_package) for every module of ``package``."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, is_package)
    return found


def _imported_names(tree: ast.AST, module: str, is_package: bool, known: Iterable[str]) -> set[str]:
    known = set(known)
    base = module if is_package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                target = ".".join(parts + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                names.add(full if full in known else target)
    return names


def _resolve(name: str, known: dict[str, tuple[Path, bool]]) -> str | None:
    """The longest known module that ``name`` starts with (an imported attribute -> its module)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(src: Path = SRC, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, anywhere in its body."""
    known = modules(src, package)
    graph: dict[str, set[str]] = {m: set() for m in known}
    for module, (path, is_package) in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for name in _imported_names(tree, module, is_package, known):
            if name == package or name.startswith(package + "."):
                target = _resolve(name, known)
                if target is not None and target != module:
                    graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_the_cycle_finder_sees_cycles_hidden_in_function_local_and_type_checking_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from pkg.sub.c import thing\n    return thing\n")
    (pkg / "sub" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import X\nthing = 1\n")
    (pkg / "d.py").write_text("import pkg.a\nfrom . import e\n")
    (pkg / "e.py").write_text("from .sub import c\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.b"] == {"pkg.sub.c"}
    assert graph["pkg.sub.c"] == {"pkg.a"}
    assert graph["pkg.d"] == {"pkg.a", "pkg.e"}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]


def test_the_package_has_no_import_cycles_beyond_the_justified_ones() -> None:
    graph = import_graph()
    assert len(graph) > 100, "the package's modules were not found"
    found = {frozenset(c) for c in cycles(graph)}
    unexpected = sorted(sorted(c) for c in found - ALLOWED.keys())
    assert not unexpected, f"import cycles (break them, or justify one in ALLOWED): {unexpected}"
    stale = sorted(sorted(c) for c in ALLOWED.keys() - found)
    assert not stale, f"ALLOWED lists cycles that no longer exist: {stale}"
