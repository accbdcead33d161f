"""What a run records about where its numbers came from: software versions, the model's identity,
the index manifest's hash, and the fingerprint of the configuration that determines the answers."""

from __future__ import annotations

import hashlib
import platform
import sys
from importlib import metadata
from pathlib import Path

from routerag import __version__
from routerag.eval.runs import Versions

TRACKED_PACKAGES = (
    "pydantic",
    "numpy",
    "torch",
    "sentence-transformers",
    "faiss-cpu",
    "bm25s",
    "python-igraph",
    "spacy",
    "transformers",
    "llama-cpp-python",
    "openai",
    "httpx",
)


def package_versions(names: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str]:
    """Installed versions of the packages that can change results (absent ones are left out)."""
    found: dict[str, str] = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def files_sha256(paths: list[Path]) -> str | None:
    """One hash over the files' bytes, in order (None for no files)."""
    if not paths:
        return None
    h = hashlib.sha256()
    for path in paths:
        h.update(Path(path).read_bytes())
    return h.hexdigest()


def collect_versions(model: str | None = None, index_manifest: str | None = None) -> Versions:
    """Versions of this process; ``model`` is the model's identity, ``index_manifest`` the hash of
    the index manifest(s) the sources were loaded from."""
    return Versions(
        routerag=__version__,
        python=sys.version.split()[0],
        platform=platform.platform(),
        packages=package_versions(),
        model=model,
        index_manifest=index_manifest,
    )

