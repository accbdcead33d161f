"""No two classes in ``src/routerag`` share a name: a name found in a traceback, a schema or a
search names one class (nested and function-local classes included)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

SRC = Path(__file__).resolve().parents[2] / "src" / "routerag"


def class_definitions(root: Path) -> dict[str, list[str]]:
    """Class name -> where each class of that name is defined (``path:line``)."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                found[node.name].append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_two_classes_share_a_name():
    found = class_definitions(SRC)
    assert len(found) > 300, "too few classes found to be the package"
    shared = {name: places for name, places in found.items() if len(places) > 1}
    assert shared == {}, f"rename one of each: {shared}"


def test_the_check_sees_nested_and_local_classes(tmp_path: Path):
    (tmp_path / "a.py").write_text("class Box:\n    class Inner: ...\n", encoding="utf-8")
    (tmp_path / "b.py").write_text("def make():\n    class Inner: ...\n    return Inner\n", encoding="utf-8")
    assert class_definitions(tmp_path)["Inner"] == ["a.py:2", "b.py:2"]
