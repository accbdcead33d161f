"""Where the public benchmark files live, and the registry of named datasets over them."""

from __future__ import annotations

import os
from pathlib import Path


class DataNotFoundError(FileNotFoundError):
    pass


def data_root() -> Path:
    """The shared benchmark folder: ``ROUTERAG_DATA_DIR`` if set, else the first ``shared/data``
    folder found walking up from the current directory and from this package's location."""
    env = os.environ.get("ROUTERAG_DATA_DIR")
    if env:
        path = Path(env)
        if not path.is_dir():
            raise DataNotFoundError(f"ROUTERAG_DATA_DIR={env} is not a directory")
        return path
    starts = [Path.cwd().resolve(), Path(__file__).resolve().parent]
    for start in starts:
        for folder in [start, *start.parents]:
            candidate = folder / "shared" / "data"
            if candidate.is_dir():
                return candidate
    raise DataNotFoundError(
        "benchmark data not found: set ROUTERAG_DATA_DIR to the folder holding 2wikimultihopqa/, musique_train100/, ..."
    )
