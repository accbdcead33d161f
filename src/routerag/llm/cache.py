"""A persistent response cache: SQLite keyed by the sha256 of everything that shapes an answer.

The key covers the model identity, the messages, ``continue_final`` and every sampling
parameter (seed and grammar included). Sampled requests without a seed (``temperature > 0``
and ``seed=None``) are not deterministic and are never cached. Hits come back with
``cached=True`` and the lookup time as latency; their usage is the original call's.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path

from routerag.llm.base import ChatModel, ChatResponse, GenerationParams, Message, ModelError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    response TEXT NOT NULL,
    created REAL NOT NULL
)
"""


class CacheError(ModelError):
    """The cache database cannot be opened, read or written (corrupt, not SQLite, read-only)."""


def cache_key(identity: str, messages: list[Message], params: GenerationParams, continue_final: bool) -> str:
    payload = {
        "model": identity,
        "messages": [m.model_dump() for m in messages],
        "params": params.model_dump(),
        "continue_final": continue_final,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def is_cacheable(params: GenerationParams) -> bool:
    return params.temperature == 0.0 or params.seed is not None


class ResponseCache:
    """Thread-safe SQLite store of ``ChatResponse`` JSON (never pickles)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(_SCHEMA)
            self._db.execute("SELECT count(*) FROM responses").fetchone()
        except sqlite3.DatabaseError as exc:
            raise CacheError(f"response cache {self.path} is unusable ({exc}); delete it to start a new one") from None

    def get(self, key: str) -> ChatResponse | None:
        try:
            with self._lock:
                row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError as exc:
            raise CacheError(f"response cache {self.path} cannot be read ({exc}); delete it") from None
        if row is None:
            return None
        try:
            return ChatResponse.model_validate_json(row[0])
        except ValueError as exc:
            raise CacheError(f"response cache {self.path} holds an invalid entry {key[:12]}…: {exc}") from None

    def put(self, key: str, model: str, response: ChatResponse) -> None:
        try:
            with self._lock:
                self._db.execute(
                    "INSERT OR REPLACE INTO responses (key, model, response, created) VALUES (?, ?, ?, ?)",
                    (key, model, response.model_dump_json(), time.time()),
                )
        except sqlite3.DatabaseError as exc:
            raise CacheError(f"response cache {self.path} cannot be written ({exc})") from None

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


class CachedModel:
    """Wraps a chat model with a :class:`ResponseCache`. ``identity`` distinguishes models that
    share a name (defaults to ``inner.name``)."""

    def __init__(self, inner: ChatModel, path: str | Path, identity: str | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.identity = identity or inner.name
        self.cache = ResponseCache(path)

    def chat(
        self,
        messages: list[Message],
        params: GenerationParams | None = None,
        *,
        continue_final: bool = False,
    ) -> ChatResponse:
        params = params or GenerationParams()
        if not is_cacheable(params):
            return self.inner.chat(messages, params, continue_final=continue_final)
        start = time.perf_counter()
        key = cache_key(self.identity, messages, params, continue_final)
        hit = self.cache.get(key)
        if hit is not None:
            return hit.model_copy(update={"cached": True, "latency_ms": (time.perf_counter() - start) * 1000.0})
        response = self.inner.chat(messages, params, continue_final=continue_final)
        self.cache.put(key, self.identity, response)
        return response
