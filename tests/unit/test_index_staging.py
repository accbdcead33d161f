"""Staging folders of a killed index build: ``routerag verify-index`` names them, and the next
build over the same directory reclaims them; a build still running keeps its own."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from routerag.cli.app import app
from routerag.cli.main import _load
from routerag.corpus.schema import Document
from routerag.index.bundle import IndexBundle, build_index

_load()
runner = CliRunner()
DOCS = [Document.make(f"Title {i}", f"passage {i} about Lothair II and Teutberga") for i in range(12)]

# a build killed (SIGKILL) while it writes into its staging folder
KILLED = """
import os, signal, sys
from pathlib import Path
from routerag.index.staging import staging_dir

target = Path(sys.argv[1])
with staging_dir(target.parent, target.name) as staging:
    (staging / "docs.jsonl").write_text("half written")
    os.kill(os.getpid(), signal.SIGKILL)
"""


def killed_build(target: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", KILLED, str(target)], env=env, capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr


def leftovers(parent: Path, name: str) -> list[Path]:
    return sorted(p for p in parent.iterdir() if p.name.startswith(f".{name}."))


def test_a_killed_build_is_reported_and_reclaimed_by_the_next(tmp_path):
    out = tmp_path / "idx"
    build_index(DOCS, out, components=("bm25",))
    killed_build(out)
    left = leftovers(tmp_path, "idx")
    assert len(left) == 1 and ".idx.building-" in left[0].name

    result = runner.invoke(app, ["verify-index", str(out)])
    assert result.exit_code == 0, result.output
    assert str(left[0]) in result.output and "left by an index build" in result.output

    live = tmp_path / ".idx.building-live"  # a build running in another process holds its folder
    live.mkdir()
    fd = os.open(live, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        build_index(DOCS, out, components=("bm25",), overwrite=True)
        assert leftovers(tmp_path, "idx") == [live]  # the killed one reclaimed, the live one kept
    finally:
        os.close(fd)
    live.rmdir()
    result = runner.invoke(app, ["verify-index", str(out)])
    assert result.exit_code == 0 and "left by an index build" not in result.output, result.output


def test_a_killed_component_build_is_reported_and_reclaimable(tmp_path):
    out = tmp_path / "idx"
    bundle: IndexBundle = build_index(DOCS, out, components=("bm25",))
    killed_build(out / "dense")
    assert len(leftovers(out, "dense")) == 1
    assert "left by an index build" in runner.invoke(app, ["verify-index", str(out)]).output
    from routerag.index.staging import reclaim

    assert len(reclaim(out, "dense")) == 1 and leftovers(out, "dense") == []
    assert bundle.directory == out
