"""Hybrid retrieval: reciprocal rank fusion (k=60) of a dense passage list and a graph list, each
fetched at ``2k``; hits deduplicated by ``doc_id``, scored by their fused RRF score."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, ClassVar

from routerag.sources.base import BaseSource, QueryResult, Source, Stopwatch
from routerag.sources.fusion import RRF_K, rrf

if TYPE_CHECKING:
    from routerag.index.bundle import IndexBundle


class HybridSource(BaseSource):
    requires: ClassVar[tuple[str, ...]] = ("graph",)
    default_mode: ClassVar[str] = "hybrid"

    def __init__(
        self,
        passage: Source,
        graph: Source,
        *,
        name: str | None = None,
        mode: str | None = None,
        profile: str | None = None,
        rrf_k: int = RRF_K,
    ) -> None:
        self.passage = passage
        self.graph = graph
        self._identify(name, mode, profile, f"rank fusion of {passage.name} and {graph.name}")
        self.rrf_k = rrf_k

    @classmethod
    def from_bundle(cls, bundle: "IndexBundle", *, name: str | None = None, profile: str | None = None) -> "HybridSource":
        from routerag.sources.graph import GraphPassageSource, GraphSource

        graph_index = bundle.component("graph")
        if bundle.has("dense"):
            from routerag.sources.passage import PassageSource

            passage: Source = PassageSource.from_bundle(bundle)
        else:
            passage = GraphPassageSource(graph_index)
        return cls(passage, GraphSource(graph_index), name=name, profile=profile)

    def _search(self, queries: list[str], k: int) -> list[QueryResult]:
        with Stopwatch() as sw:
            with ThreadPoolExecutor(max_workers=2) as pool:
                dense_f = pool.submit(self.passage.search, queries, 2 * k)
                graph_f = pool.submit(self.graph.search, queries, 2 * k)
                dense, graph = dense_f.result(), graph_f.result()
            fused = [
                [h.model_copy(update={"source": self.name, "mode": self.mode}) for h in rrf([d.hits, g.hits], self.rrf_k, top=k)]
                for d, g in zip(dense, graph)
            ]
        share = sw.ms / len(queries)
        return [
            QueryResult(query=q, source=self.name, hits=hits, latency_ms=share, metadata={"kind": "hybrid", "graph": g.metadata})
            for q, hits, g in zip(queries, fused, graph)
        ]
