"""docs/architecture.md's examples run: its ``python`` blocks, in order, as one script (a source,
a strategy through the front door, a reward, a backend, a router), and every source file it names
exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"


def test_the_examples_run_and_print_what_they_show(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 5
    script = tmp_path / "examples.py"
    script.write_text("\n".join(blocks), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "a bag-of-words ranking function",
        "a ranking function ['BM25']",
        "[1.0]",
        "hello",
        "glossary",
    ]


def test_every_file_the_page_names_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    named = set(re.findall(r"`([\w/.-]+\.py)`", text))
    assert named
    missing = [p for p in sorted(named) if not ((ROOT / "src" / "routerag" / p).is_file() or (ROOT / p).is_file() or (ROOT / "src" / p).is_file())]
    assert missing == []
