"""No function in src/ over 80 lines without a reason written beside it: a comment starting
"Over 80 lines:" right above its ``def`` (or its decorators)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

SRC = Path(__file__).resolve().parents[2] / "src" / "routerag"
LIMIT = 80


def long_functions_without_a_reason() -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if node.end_lineno is None or node.end_lineno - node.lineno + 1 <= LIMIT:
                continue
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            above = first - 2  # 0-based index of the line above
            while above >= 0 and lines[above].lstrip().startswith("#") and "Over 80 lines:" not in lines[above]:
                above -= 1
            if above < 0 or "Over 80 lines:" not in lines[above]:
                found.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)")
    return found


def test_long_functions_say_why() -> None:
    assert long_functions_without_a_reason() == []
