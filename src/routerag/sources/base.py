"""The retrieval protocol: typed requests, hits and results, and the ``Source`` interface.

A request names its queries, ``k`` and an explicit list of sources (a mode such as
``passage``/``graph``/``hybrid`` is the name of a mounted source) — never tags hidden
inside the query text. Every call reports its own wall time.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, Field, field_validator, model_validator

from routerag.errors import RouteragError
from routerag.trace import Hit

MAX_QUERY_CHARS = 2_000
MAX_BATCH = 256
MAX_K = 100


class RetrievalError(RouteragError, ValueError):
    """A retrieval request that cannot be served (unknown source, bad query, ...)."""


class QueryResult(BaseModel):
    query: str
    source: str
    hits: list[Hit]
    latency_ms: float  # this query's share of the call (batch wall time / batch size for batched sources)
    metadata: dict[str, Any] = Field(default_factory=dict)  # e.g. graph seeds, fallback used


class RetrievalRequest(BaseModel):
    queries: list[str] = Field(min_length=1, max_length=MAX_BATCH)
    k: int = Field(default=5, ge=1, le=MAX_K)
    sources: list[str] = Field(min_length=1)

    @field_validator("queries")
    @classmethod
    def _check_queries(cls, queries: list[str]) -> list[str]:
        for i, q in enumerate(queries):
            if not q.strip():
                raise ValueError(f"query {i} is empty")
            if len(q) > MAX_QUERY_CHARS:
                raise ValueError(f"query {i} has {len(q)} characters; the limit is {MAX_QUERY_CHARS}")
        return queries

    @model_validator(mode="after")
    def _unique_sources(self) -> "RetrievalRequest":
        if len(set(self.sources)) != len(self.sources):
            raise ValueError("sources are listed twice")
        return self


class RetrievalResponse(BaseModel):
    """Results per source, each a list aligned with the request's queries."""

    results: dict[str, list[QueryResult]]
    wall_ms: float


@runtime_checkable
class Source(Protocol):
    """A knowledge source. ``search`` takes a batch and computes it as a batch. Any object with
    these members is one; the built-in sources extend :class:`BaseSource`."""

    name: str
    mode: str
    profile: str  # a description of what it holds (used by routing over source profiles)

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]: ...


class SourceIdentity:
    """The ``name``, ``mode`` and ``profile`` every :class:`Source` carries, set one way: ``mode``
    defaults to the class's ``default_mode``, ``name`` to the mode, ``profile`` to the source's
    own description of what it holds."""

    default_mode: ClassVar[str] = ""
    name: str
    mode: str
    profile: str

    def _identify(self, name: str | None, mode: str | None, profile: str | None, described: str) -> None:
        self.mode = mode or self.default_mode
        self.name = name or self.mode
        self.profile = profile or described


def check_queries(queries: Sequence[str]) -> list[str]:
    """The same rules as ``RetrievalRequest`` for sources called directly."""
    queries = list(queries)
    for i, q in enumerate(queries):
        if not isinstance(q, str) or not q.strip():
            raise RetrievalError(f"query {i} is empty")
        if len(q) > MAX_QUERY_CHARS:
            raise RetrievalError(f"query {i} has {len(q)} characters; the limit is {MAX_QUERY_CHARS}")
    return queries


def check_k(k: int) -> int:
    if not isinstance(k, int) or k < 1:
        raise RetrievalError(f"k must be a positive integer, got {k!r}")
    return k


class BaseSource(SourceIdentity):
    """A :class:`Source` whose public ``search`` is written once and calls ``_search``, what each
    source implements (a template method, as LlamaIndex's ``BaseRetriever.retrieve`` calls
    ``_retrieve``). ``search`` checks the queries and ``k`` by ``RetrievalRequest``'s rules
    (:class:`RetrievalError`), answers an empty batch with no results without calling
    ``_search``, and checks that ``_search`` gave one result per query."""

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]:
        batch = check_queries(queries)
        k = check_k(k)
        if not batch:
            return []
        results = self._search(batch, k)
        if len(results) != len(batch):
            raise RetrievalError(f"source {self.name!r} returned {len(results)} results for {len(batch)} queries")
        return results

    def _search(self, queries: list[str], k: int) -> list[QueryResult]:
        """One result per query, in order, for a non-empty batch of checked queries and ``k >= 1``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _search")


class Stopwatch:
    """``with Stopwatch() as sw: ...; sw.ms``"""

    def __enter__(self) -> "Stopwatch":
        self._t0 = time.perf_counter()
        self.ms = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.ms = (time.perf_counter() - self._t0) * 1000.0


def rank_hits(hits: list[Hit]) -> list[Hit]:
    """Return the hits with ``rank`` renumbered 1..n in list order."""
    return [h.model_copy(update={"rank": i}) for i, h in enumerate(hits, start=1)]
