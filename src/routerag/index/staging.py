"""Staging folders of index builds: a build writes into a hidden folder beside its target
(``.NAME.building-XXXX``; an overwrite moves the old index aside as ``.NAME.old-XXXX``) and renames
it into place. While a build runs it holds an advisory ``flock`` on its staging folder, released by
the kernel when the process ends however it ends, so a folder nobody holds was left by a build that
was killed: the next build over the same target reclaims it, and ``routerag verify-index`` lists it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["abandoned", "abandoned_around", "reclaim", "staging_dir"]

MARKS = (".building-", ".old-")


def _candidates(parent: Path, name: str) -> list[Path]:
    if not parent.is_dir():
        return []
    prefixes = tuple(f".{name}{mark}" for mark in MARKS)
    return sorted(p for p in parent.iterdir() if p.is_dir() and p.name.startswith(prefixes))


def _held(folder: Path) -> bool:
    """Whether a running build holds ``folder`` (no ``flock`` on this platform: assume it does)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        return True
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops the probe's own lock
    return False


def abandoned(parent: Path, name: str) -> list[Path]:
    """Staging folders of target ``name`` in ``parent`` that no running build holds."""
    return [p for p in _candidates(parent, name) if not _held(p)]


def abandoned_around(directory: Path) -> list[Path]:
    """The abandoned staging folders of the index at ``directory``: of the index itself (beside it)
    and of components added to it (inside it)."""
    inside = []
    if directory.is_dir():
        inside = [p for p in sorted(directory.iterdir())
                  if p.is_dir() and p.name.startswith(".") and ".building-" in p.name and not _held(p)]
    return abandoned(directory.parent, directory.name) + inside


def reclaim(parent: Path, name: str) -> list[Path]:
    """Remove the abandoned staging folders of ``name`` in ``parent``; the ones removed."""
    removed = abandoned(parent, name)
    for folder in removed:
        shutil.rmtree(folder, ignore_errors=True)
    return removed


@contextlib.contextmanager
def staging_dir(parent: Path, name: str) -> Iterator[Path]:
    """A fresh staging folder for target ``name`` in ``parent``, held (``flock``) for the block;
    abandoned ones of the same target are reclaimed first. The caller renames it into place or
    removes it."""
    reclaim(parent, name)
    staging = Path(tempfile.mkdtemp(dir=parent, prefix=f".{name}.building-"))
    staging.chmod(0o755)
    fd = os.open(staging, os.O_RDONLY)
    try:
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - non-POSIX
            pass
        yield staging
    finally:
        os.close(fd)
