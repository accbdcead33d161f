"""The project's text refers to features, dates and experiment records, never to numbered work
periods or tracker numbers ("session 16", "issue 14 §7"): such numbers mean nothing to a reader of
a clone. Scans README.md, docs/ (Markdown; the per-question run logs under docs/results are data),
src/, configs/, scripts/, tests/ and benchmarks/ (source and text files; bundled data sets such as the demo
corpus hold real-world text like "volume 1, issue 1" and are not scanned)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PATTERN = re.compile(r"(?i)\b(session|issue)s?\s*#?\d+")
CODE_DIRS = ("src", "configs", "scripts", "tests", "benchmarks")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".sh", ".toml", ".txt", ".cfg", ".ini", ".js", ".html", ".css", ".jinja"}
SKIP_DIRS = {"__pycache__", ".git", ".mypy_cache", ".ruff_cache", ".pytest_cache", "node_modules"}


def _files() -> list[Path]:
    files = [ROOT / "README.md"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    for name in CODE_DIRS:
        files += sorted(p for p in (ROOT / name).rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES)
    this = Path(__file__).resolve()
    return [p for p in files if p.exists() and p.resolve() != this and not SKIP_DIRS.intersection(p.relative_to(ROOT).parts)]


def worklog_refs(text: str) -> list[tuple[int, str]]:
    """(line number, matched text) of every numbered work-period or tracker reference in ``text``."""
    return [(n, m.group(0)) for n, line in enumerate(text.splitlines(), 1) for m in PATTERN.finditer(line)]


def test_pattern_finds_worklog_refs_and_spares_ordinary_text() -> None:
    assert [m for _, m in worklog_refs("as in session 16 (issue 14 §7), Issue #3 and sessions 2-4")] == [
        "session 16", "issue 14", "Issue #3", "sessions 2"]
    assert worklog_refs("sessionStorage keeps the key; the issue tracker; tissue 3; 5xx issues; session-scoped") == []


def test_no_worklog_refs_in_the_projects_text() -> None:
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {match}"
        for path in _files()
        for n, match in worklog_refs(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert not hits, "numbered work periods or tracker numbers (refer to a feature, a date or an experiment record):\n" + "\n".join(hits)
