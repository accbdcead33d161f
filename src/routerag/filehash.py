"""Content hashes of files named in configurations (LoRA adapters), cached by path, size and
modification time: a file rewritten in place is hashed again, an unchanged one once a process."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path


def file_sha256(path: str | Path, *, what: str = "file") -> str:
    """The SHA-256 of the file's bytes (hex); a :class:`ValueError` naming ``what`` when it is missing."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{what} {path} does not exist")
    stat = path.stat()
    return _sha256_of(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _sha256_of(path: str, size: int, mtime_ns: int) -> str:
    return read_sha256(path)


def read_sha256(path: str | Path) -> str:
    """The SHA-256 of the file's bytes, read now (no cache: index verification must see the disk)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
