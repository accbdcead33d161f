"""Turn a configured model name into a local file: ``bundled:…`` names, or an existing path."""

from __future__ import annotations

from pathlib import Path

from routerag.llm.base import ModelError
from routerag.llm.bundled import BUNDLED_PREFIX, bundled_model_path


def resolve_model_file(model: str) -> Path:
    """A ``bundled:`` name (assembled on first use) or a path to an existing file."""
    if model.startswith(BUNDLED_PREFIX):
        return bundled_model_path(model)
    path = Path(model).expanduser()
    if path.is_file():
        return path
    raise ModelError(f"model {model!r} is neither a bundled:… name nor an existing file")
