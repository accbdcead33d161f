"""Index manifests: what an index directory holds and how it was built. Loading checks the
manifest (format version, kind, corpus hash, embedder/extractor identity) before reading data.

Each manifest also records the size and sha256 of every file it covers, written at build time
(``files``). :func:`check_files` compares them: sizes always, hashes of files up to
``HASH_AT_LOAD_BYTES`` at every load, and of every file (the large vector files too) when asked
(``routerag verify-index``, ``load_index(verify=True)``). An index built before the hashes existed
loads as before, with one log line saying it cannot be checked."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from routerag import __version__
from routerag.config import atomic_write_text
from routerag.errors import RouteragError
from routerag.filehash import read_sha256

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
HASH_AT_LOAD_BYTES = 16 * 2**20  # files up to this size are hashed at every load; larger ones by verify


class IndexLoadError(RouteragError, ValueError):
    """An index directory that cannot be loaded or extended (missing, wrong kind, mismatched
    manifest, an unknown or duplicate component)."""


class FileDigest(BaseModel):
    size: int
    sha256: str


class Manifest(BaseModel):
    format_version: int = FORMAT_VERSION
    kind: str  # "bundle", "dense", "bm25", "graph", ...
    corpus_hash: str
    n_docs: int
    embedder: str | None = None
    extractor: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    components: list[str] = Field(default_factory=list)  # for bundles
    # relative path -> size and sha256 at build time (empty in an index built before they existed)
    files: dict[str, FileDigest] = Field(default_factory=dict)
    created_at: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    routerag_version: str = __version__


def corpus_hash(doc_ids: Iterable[str]) -> str:
    """Order-sensitive hash of the document ids (ids are content hashes, so this covers content)."""
    h = hashlib.sha256()
    for doc_id in doc_ids:
        h.update(doc_id.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()[:32]


def covered_files(directory: Path, *, tree: bool = True) -> list[str]:
    """The files a manifest covers, relative to ``directory``: every file below it (``tree``) or
    only those directly in it (a bundle: its components have their own manifests); the manifest
    itself and hidden entries (staging folders, lock and temporary files) excluded."""
    found: list[str] = []
    for path in sorted(directory.rglob("*") if tree else directory.iterdir()):
        rel = path.relative_to(directory)
        if rel.as_posix() == MANIFEST_NAME or any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        found.append(rel.as_posix())
    return found


def write_manifest(directory: str | Path, manifest: Manifest, *, tree: bool = True) -> None:
    """Write ``manifest.json`` last, recording the size and sha256 of the files it covers."""
    directory = Path(directory)
    files = {rel: FileDigest(size=(directory / rel).stat().st_size, sha256=read_sha256(directory / rel))
             for rel in covered_files(directory, tree=tree)}
    manifest = manifest.model_copy(update={"files": files})
    atomic_write_text(directory / MANIFEST_NAME, manifest.model_dump_json(indent=2))


_UNCHECKED: set[Path] = set()


def check_files(directory: str | Path, manifest: Manifest, *, full: bool = False, warn: bool = True) -> int:
    """Compare the files with the sizes and hashes recorded at build time; any difference is an
    :class:`IndexLoadError` saying the file is corrupt and the index must be rebuilt. Hashes are
    checked for files up to ``HASH_AT_LOAD_BYTES``, or for all with ``full``. Returns the bytes
    hashed. A manifest without hashes (an older index) is logged once per directory with ``warn``."""
    directory = Path(directory)
    if not manifest.files:
        if warn and directory.resolve() not in _UNCHECKED:
            _UNCHECKED.add(directory.resolve())
            log.warning("%s: built without content hashes, so its files cannot be checked; rebuild the index "
                        "to have them checked", directory)
        return 0
    hashed = 0
    for rel, digest in manifest.files.items():
        path = directory / rel
        if not path.is_file():
            raise IndexLoadError(f"{path}: missing; the index is incomplete, rebuild it")
        size = path.stat().st_size
        if size != digest.size:
            raise IndexLoadError(f"{path}: corrupt ({size:,} bytes, built as {digest.size:,}); rebuild the index")
        if full or size <= HASH_AT_LOAD_BYTES:
            if read_sha256(path) != digest.sha256:
                raise IndexLoadError(f"{path}: corrupt (its content differs from the sha256 recorded when it was "
                                     "built); rebuild the index")
            hashed += size
    return hashed


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
