"""docs/guides/integrations.md shows the code the tests run: each block marked
``<!-- snippet: NAME -->`` is the file docs/guides/snippets/NAME, byte for byte (the snippet tests
run those files against live servers and real indexes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
GUIDES = Path(__file__).resolve().parents[2] / "docs" / "guides"
BLOCK = re.compile(r"<!-- snippet: (?P<name>[\w.-]+) -->\n```\w*\n(?P<code>.*?)\n```", re.S)


def _blocks() -> dict[str, str]:
    return {m["name"]: m["code"] for m in BLOCK.finditer((GUIDES / "integrations.md").read_text())}


def test_every_snippet_file_is_shown_in_the_guide() -> None:
    files = {p.name for p in (GUIDES / "snippets").iterdir() if p.is_file()}
    assert files == set(_blocks()), "a snippet file is missing from integrations.md, or the guide names one that does not exist"


@pytest.mark.parametrize("name", sorted(_blocks()))
def test_the_guide_shows_the_file_as_it_is(name: str) -> None:
    assert _blocks()[name] == (GUIDES / "snippets" / name).read_text().rstrip(), (
        f"integrations.md's block for {name} differs from docs/guides/snippets/{name}: copy the file into the guide")
