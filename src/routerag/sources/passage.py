"""Dense passage retrieval over a bundle's ``dense`` component: one embedder call and one FAISS
search per batch of queries."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from routerag.index.dense import DenseIndex
from routerag.index.docstore import DocStore
from routerag.sources.base import BaseSource, QueryResult, Stopwatch
from routerag.sources.hits import hits_from_rows

if TYPE_CHECKING:
    from routerag.index.bundle import IndexBundle


class PassageSource(BaseSource):
    """Top-k passages by cosine similarity of ``title\\ntext`` embeddings."""

    requires: ClassVar[tuple[str, ...]] = ("dense",)
    default_mode: ClassVar[str] = "passage"

    def __init__(
        self,
        dense: DenseIndex,
        store: DocStore,
        *,
        name: str | None = None,
        mode: str | None = None,
        profile: str | None = None,
    ) -> None:
        self.dense = dense
        self.store = store
        self._identify(name, mode, profile, f"dense retrieval over {len(store)} passages")

    @classmethod
    def from_bundle(cls, bundle: "IndexBundle", *, name: str | None = None, profile: str | None = None) -> "PassageSource":
        return cls(bundle.component("dense"), bundle.store, name=name, profile=profile)

    def _search(self, queries: list[str], k: int) -> list[QueryResult]:
        with Stopwatch() as sw:
            vectors = self.dense.embed_queries(queries)
            scores, rows = self.dense.search(vectors, k)
            per_query = [
                hits_from_rows(self.store, rows[i], scores[i], source=self.name, mode=self.mode)
                for i in range(len(queries))
            ]
        share = sw.ms / len(queries)
        return [
            QueryResult(query=q, source=self.name, hits=hits, latency_ms=share)
            for q, hits in zip(queries, per_query)
        ]
