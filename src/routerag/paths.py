"""Where routerag keeps caches (assembled model, demo index, response cache). Never hard-coded:
``ROUTERAG_HOME`` overrides, else ``$XDG_CACHE_HOME/routerag``, else ``~/.cache/routerag``."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


def home() -> Path:
    env = os.environ.get("ROUTERAG_HOME")
    if env:
        root = Path(env)
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "routerag"
    root.mkdir(parents=True, exist_ok=True)
    return root


def cache_dir(name: str) -> Path:
    path = home() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def exclusive(lock_path: str | Path) -> Iterator[None]:
    """An advisory inter-process lock (POSIX ``flock``) on ``lock_path``, held for the block, so
    that two processes do not build the same cached artefact (a joined model, an index) at once."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    lock_path = Path(lock_path)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
