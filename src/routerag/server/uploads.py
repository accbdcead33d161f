"""Custom sources uploaded through the service: validated in the request, indexed (BM25) in a
background thread, persisted under the service's data directory and mountable by name in any
strategy run (``sources: ["name"]`` in an ask or run request).

Layout: ``<data_dir>/sources/<name>/source.json`` (a :class:`CustomSource`) and
``<data_dir>/sources/<name>/index/`` (an index bundle). ``<name>`` always matches
:data:`~routerag.server.upload_parse.NAME_PATTERN`, so no request can point anywhere else.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from routerag.config import atomic_write_text
from routerag.server.upload_parse import (
    RESERVED_NAMES,
    ParsedUpload,
    UnknownUploadError,
    UploadConflictError,
    UploadRejected,
    UploadSettings,
    check_name,
)
from routerag.sources.base import Source
from routerag.sources.sourceset import SourceSet

log = logging.getLogger(__name__)

SourceState = Literal["indexing", "ready", "failed"]
META_NAME = "source.json"


class CustomSource(BaseModel):
    name: str
    profile: str
    format: str
    n_docs: int
    rows: int
    duplicates: int
    state: SourceState
    error: str | None = None
    created_at: float
    indexed_at: float | None = None
    index_ms: float | None = None


class SourceEntry(BaseModel):
    """One row of ``GET /v1/sources``: a source the service was started with or an upload."""

    name: str
    kind: Literal["builtin", "custom"]
    mode: str
    profile: str
    state: SourceState = "ready"
    n_docs: int | None = None
    error: str | None = None


class SourceStore:
    """Uploaded sources: their metadata, background indexing and loaded ``Source`` objects."""

    def __init__(self, data_dir: Path, settings: UploadSettings, reserved: set[str]) -> None:
        self.root = (data_dir / "sources").resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.settings = settings
        self.reserved = reserved
        self._meta: dict[str, CustomSource] = {}
        self._loaded: dict[str, Source] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="routerag-index")
        self._scan()

    # ------------------------------------------------------------------ paths & persistence
    def _dir(self, name: str) -> Path:
        path = (self.root / check_name(name)).resolve()
        if path.parent != self.root:  # belt and braces: the name pattern already forbids this
            raise UploadRejected(f"invalid source name {name!r}")
        return path

    def _save(self, meta: CustomSource) -> None:
        atomic_write_text(self._dir(meta.name) / META_NAME, meta.model_dump_json(indent=1))

    def _scan(self) -> None:
        for meta_path in sorted(self.root.glob(f"*/{META_NAME}")):
            try:
                meta = CustomSource.model_validate_json(meta_path.read_text(encoding="utf-8"))
                check_name(meta.name)
            except (ValidationError, UploadRejected, OSError, ValueError) as exc:
                log.warning("skipping %s: %s", meta_path, exc)
                continue
            if meta_path.parent.name != meta.name:
                continue
            if meta.state == "indexing":  # the process stopped mid-build
                meta = meta.model_copy(update={"state": "failed", "error": "indexing was interrupted; upload again"})
            self._meta[meta.name] = meta

    # ------------------------------------------------------------------ API
    def list(self) -> list[CustomSource]:
        with self._lock:
            return [m.model_copy() for m in self._meta.values()]

    def get(self, name: str) -> CustomSource:
        with self._lock:
            meta = self._meta.get(name)
        if meta is None:
            raise UnknownUploadError(f"no custom source {name!r}")
        return meta.model_copy()

    def submit(self, name: str, profile: str, parsed: ParsedUpload) -> CustomSource:
        check_name(name)
        if name in self.reserved:
            raise UploadConflictError(f"{name!r} is a source the service was started with; choose another name")
        if name in RESERVED_NAMES:
            raise UploadConflictError(f"{name!r} is reserved for a retrieval mode; choose another name")
        profile = profile.strip() or f"Uploaded passages '{name}' ({len(parsed.docs)} passages)"
        if len(profile) > self.settings.max_profile_chars:
            raise UploadRejected(f"profile has {len(profile)} characters; the limit is {self.settings.max_profile_chars}")
        meta = CustomSource(name=name, profile=profile, format=parsed.format, n_docs=len(parsed.docs), rows=parsed.rows,
                            duplicates=parsed.duplicates, state="indexing", created_at=time.time())
        with self._lock:
            if name in self._meta:
                raise UploadConflictError(f"a custom source named {name!r} exists; delete it first")
            if len(self._meta) >= self.settings.max_sources:
                raise UploadRejected(f"{len(self._meta)} custom sources exist; the limit is {self.settings.max_sources}")
            self._meta[name] = meta
        self._pool.submit(self._build, meta, parsed)
        return meta.model_copy()

    def delete(self, name: str) -> CustomSource:
        directory = self._dir(name)
        with self._lock:
            meta = self._meta.get(name)
            if meta is None:
                raise UnknownUploadError(f"no custom source {name!r}")
            if meta.state == "indexing":
                raise UploadConflictError(f"source {name!r} is still being indexed; delete it when it is ready")
            del self._meta[name]
            self._loaded.pop(name, None)
        shutil.rmtree(directory, ignore_errors=True)
        return meta

    def source(self, name: str) -> Source:
        """The mounted ``Source`` of a ready custom source (loaded once)."""
        with self._lock:
            meta = self._meta.get(name)
            loaded = self._loaded.get(name)
        if meta is None:
            raise UploadRejected(f"unknown source {name!r}; upload it first (GET /v1/sources lists them)")
        if meta.state != "ready":
            raise UploadRejected(f"source {name!r} is {meta.state}" + (f": {meta.error}" if meta.error else ""))
        if loaded is None:
            from routerag.index.bundle import load_index
            from routerag.sources.bm25 import BM25Source

            bundle = load_index(self._dir(name) / "index", components=["bm25"])
            loaded = BM25Source.from_bundle(bundle, name=name, profile=meta.profile)
            with self._lock:
                loaded = self._loaded.setdefault(name, loaded)
        return loaded

    def mount(self, base: SourceSet, names: list[str]) -> SourceSet:
        """``base`` plus the named custom sources (a new set; ``base`` is not changed)."""
        if not names:
            return base
        extra = [self.source(n) for n in dict.fromkeys(names) if n not in base.names()]
        return SourceSet([*(base.get(n) for n in base.names()), *extra])

    def wait(self, name: str, timeout_s: float = 60.0) -> CustomSource:
        deadline = time.monotonic() + timeout_s
        while (meta := self.get(name)).state == "indexing":
            if time.monotonic() > deadline:
                raise TimeoutError(f"source {name!r} still indexing after {timeout_s} s")
            time.sleep(0.02)
        return meta

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    # ------------------------------------------------------------------ worker
    def _build(self, meta: CustomSource, parsed: ParsedUpload) -> None:
        from routerag.index.bundle import build_index

        t0 = time.perf_counter()
        directory = self._dir(meta.name)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._save(meta)
            docs = [d.model_copy(update={"source": meta.name}) for d in parsed.docs]
            build_index(docs, directory / "index", components=("bm25",), overwrite=True)
            update = {"state": "ready", "indexed_at": time.time(), "index_ms": round((time.perf_counter() - t0) * 1000, 1)}
        except Exception as exc:  # noqa: BLE001 — reported as the source's state
            log.exception("indexing %s failed", meta.name)
            update = {"state": "failed", "error": f"{type(exc).__name__}: {exc}"}
        with self._lock:
            if meta.name not in self._meta:  # deleted meanwhile (cannot happen while indexing, kept safe)
                return
            done = self._meta[meta.name].model_copy(update=update)
            self._meta[meta.name] = done
        try:
            self._save(done)
        except OSError:
            log.exception("cannot write %s", META_NAME)
