"""Every exception type routerag defines derives from the root, ``RouteragError``, so that a caller
(the CLI, the MCP tools, a library user) catches routerag's refusals with one type; HTTP errors
(``ApiError``) are raised in ``server/`` only.

The walk imports every module, so it runs in a fresh interpreter (this file run as a script): an
import of ``ray`` in the test process would stop the Ray fixtures (``routerag.raycluster.LocalHead``
must start before Ray is imported)."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import routerag
from routerag.errors import RouteragError

pytestmark = pytest.mark.unit

SRC = Path(routerag.__file__).resolve().parent


def routerag_modules() -> list[str]:
    """Every module of the package, imported (heavy libraries are imported only where used)."""
    names = []
    for info in pkgutil.walk_packages(routerag.__path__, "routerag."):
        try:
            importlib.import_module(info.name)
        except ModuleNotFoundError as exc:  # an optional extra not installed here: its module is skipped
            if exc.name and exc.name.split(".")[0] == "routerag":
                raise
            continue
        names.append(info.name)
    return names


def _ours(cls: type) -> bool:
    return cls.__module__ == "routerag" or cls.__module__.startswith("routerag.")


def exception_classes() -> set[type[BaseException]]:
    """routerag's exception classes: those at module level, and any subclass created so far."""
    found: set[type[BaseException]] = set()
    for name in routerag_modules():
        for obj in vars(importlib.import_module(name)).values():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and _ours(obj):
                found.add(obj)
    pending: list[type[BaseException]] = [BaseException]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            if _ours(sub):
                found.add(sub)
            pending.append(sub)
    return found


def walk_report() -> dict[str, object]:
    """How many exception classes the walk found, and those outside the root."""
    classes = exception_classes()
    outside = sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in classes if not issubclass(cls, RouteragError))
    return {"found": len(classes), "outside": outside}


def test_every_routerag_exception_derives_from_the_root():
    done = subprocess.run([sys.executable, __file__], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["found"] > 40, "the walk found too few exception classes to be a walk of the package"
    assert report["outside"] == [], f"derive these from routerag.errors.RouteragError: {report['outside']}"


def test_no_exception_class_is_defined_where_the_walk_cannot_see_it():
    """A class statement inside a function is created only when it runs; the walk above would miss
    an exception defined there."""
    hidden = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(func):
                    if isinstance(node, ast.ClassDef) and any(
                            (ast.unparse(b).rsplit(".", 1)[-1]).endswith(("Error", "Exception")) for b in node.bases):
                        hidden.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name}")
    assert hidden == []


def test_http_errors_are_raised_in_server_only():
    raised_outside = []
    for path in sorted(SRC.rglob("*.py")):
        if path.relative_to(SRC).parts[0] == "server":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and node.exc is not None and "ApiError" in ast.unparse(node.exc):
                raised_outside.append(f"{path.relative_to(SRC)}:{node.lineno}")
            if isinstance(node, ast.ImportFrom) and node.module == "routerag.server.errors":
                raised_outside.append(f"{path.relative_to(SRC)}:{node.lineno} imports routerag.server.errors")
    assert raised_outside == []


if __name__ == "__main__":
    print(json.dumps(walk_report()))
