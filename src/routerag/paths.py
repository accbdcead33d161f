"""Where routerag keeps caches (assembled model, demo index, response cache). Never hard-coded:
``ROUTERAG_HOME`` overrides, else ``$XDG_CACHE_HOME/routerag``, else ``~/.cache/routerag``."""

from __future__ import annotations

import os
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
