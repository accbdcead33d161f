"""Lexical retrieval over a bundle's ``bm25`` component."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from routerag.index.bm25 import BM25Index
from routerag.index.docstore import DocStore
from routerag.sources.base import BaseSource, QueryResult, Stopwatch
from routerag.sources.hits import hits_from_rows

if TYPE_CHECKING:
    from routerag.index.bundle import IndexBundle


class BM25Source(BaseSource):
    """Okapi BM25 top-k; a query sharing no (non-stopword) term with the corpus gets no hits."""

    requires: ClassVar[tuple[str, ...]] = ("bm25",)
    default_mode: ClassVar[str] = "bm25"

    def __init__(self, index: BM25Index, store: DocStore, *, name: str = "bm25", profile: str | None = None) -> None:
        self.index = index
        self.store = store
        self._identify(name, None, profile, f"BM25 keyword retrieval over {len(store)} passages")

    @classmethod
    def from_bundle(cls, bundle: "IndexBundle", *, name: str | None = None, profile: str | None = None) -> "BM25Source":
        return cls(bundle.component("bm25"), bundle.store, name=name or "bm25", profile=profile)

    def _search(self, queries: list[str], k: int) -> list[QueryResult]:
        with Stopwatch() as sw:
            ranked = self.index.search(queries, k)
            per_query = [
                hits_from_rows(self.store, rows, scores, source=self.name, mode=self.mode) for scores, rows in ranked
            ]
        share = sw.ms / len(queries)
        return [
            QueryResult(query=q, source=self.name, hits=hits, latency_ms=share)
            for q, hits in zip(queries, per_query)
        ]
