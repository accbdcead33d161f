"""The install extras: what the quick start installs runs what the README shows next."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _extras() -> dict[str, list[str]]:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["optional-dependencies"]


def _names(extra: str, extras: dict[str, list[str]]) -> set[str]:
    """The distribution names ``extra`` installs, its ``routerag[...]`` references followed."""
    names: set[str] = set()
    for requirement in extras[extra]:
        name = re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower()
        if name == "routerag":
            for inner in re.search(r"\[(.*)\]", requirement).group(1).split(","):
                names |= _names(inner.strip(), extras)
        else:
            names.add(name)
    return names


def test_the_local_extra_installs_what_routerag_serve_needs():
    extras = _extras()
    assert _names("server", extras) <= _names("local", extras)
    assert {"fastapi", "uvicorn", "python-multipart"} <= _names("local", extras)
