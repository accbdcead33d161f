"""Index manifests: what an index directory holds and how it was built. Loading checks the
manifest (format version, kind, corpus hash, embedder/extractor identity) before reading data."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from routerag import __version__
from routerag.config import atomic_write_text
from routerag.errors import RouteragError

FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"


class IndexLoadError(RouteragError, ValueError):
    """An index directory that cannot be loaded or extended (missing, wrong kind, mismatched
    manifest, an unknown or duplicate component)."""


class Manifest(BaseModel):
    format_version: int = FORMAT_VERSION
    kind: str  # "bundle", "dense", "bm25", "graph", ...
    corpus_hash: str
    n_docs: int
    embedder: str | None = None
    extractor: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    components: list[str] = Field(default_factory=list)  # for bundles
    created_at: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    routerag_version: str = __version__


def corpus_hash(doc_ids: Iterable[str]) -> str:
    """Order-sensitive hash of the document ids (ids are content hashes, so this covers content)."""
    h = hashlib.sha256()
    for doc_id in doc_ids:
        h.update(doc_id.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()[:32]


def write_manifest(directory: str | Path, manifest: Manifest) -> None:
    atomic_write_text(Path(directory) / MANIFEST_NAME, manifest.model_dump_json(indent=2))


def read_manifest(
    directory: str | Path,
    *,
    kind: str,
    corpus_hash: str | None = None,
    embedder: str | None = None,
) -> Manifest:
    path = Path(directory) / MANIFEST_NAME
    if not path.is_file():
        raise IndexLoadError(f"{directory}: not an index (no {MANIFEST_NAME}); build it with `routerag index`")
    try:
        manifest = Manifest.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, UnicodeDecodeError, ValidationError) as exc:
        raise IndexLoadError(f"{path}: corrupt manifest: {exc}") from None
    if manifest.format_version != FORMAT_VERSION:
        raise IndexLoadError(
            f"{path}: index format {manifest.format_version}, this routerag reads {FORMAT_VERSION}; rebuild the index"
        )
    if manifest.kind != kind:
        raise IndexLoadError(f"{path}: a {manifest.kind!r} index, expected {kind!r}")
    if corpus_hash is not None and manifest.corpus_hash != corpus_hash:
        raise IndexLoadError(f"{path}: built over another corpus (hash {manifest.corpus_hash} != {corpus_hash})")
    if embedder is not None and manifest.embedder is not None and manifest.embedder != embedder:
        raise IndexLoadError(f"{path}: built with embedder {manifest.embedder!r}, configured {embedder!r}")
    return manifest
