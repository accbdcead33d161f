"""The top facts of the knowledge graph for a query, as hits (``mode="triples"``).

A hit's ``text`` is ``"subject | relation | object"``, its ``doc_id`` a content id of the fact
(``t`` + 16 hex digits), its ``title`` the title of the first passage the fact came from, and its
``metadata`` holds the triple and the ``doc_ids`` of every passage that stated it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from routerag.index.graph import GraphIndex, fact_text
from routerag.sources.base import BaseSource, QueryResult, Stopwatch
from routerag.sources.graph import top_rows
from routerag.trace import Hit

if TYPE_CHECKING:
    from routerag.index.bundle import IndexBundle


def fact_id(triple: Sequence[str]) -> str:
    return "t" + hashlib.sha1(fact_text(tuple(triple)).encode("utf-8")).hexdigest()[:16]


class TriplesSource(BaseSource):
    requires: ClassVar[tuple[str, ...]] = ("graph",)
    default_mode: ClassVar[str] = "triples"

    def __init__(
        self, graph: GraphIndex, *, name: str | None = None, mode: str | None = None, profile: str | None = None
    ) -> None:
        self.graph = graph
        self._identify(name, mode, profile,
                       f"{len(graph.data.facts)} (subject, relation, object) facts extracted from {graph.n_passages} passages")

    @classmethod
    def from_bundle(cls, bundle: "IndexBundle", *, name: str | None = None, profile: str | None = None) -> "TriplesSource":
        return cls(bundle.component("graph"), name=name, profile=profile)

    def _search(self, queries: list[str], k: int) -> list[QueryResult]:
        g = self.graph
        with Stopwatch() as sw:
            if g.data.facts:
                scores = (g.data.fact_vecs @ g.embed_queries(queries).T).T
                ranked = [top_rows(scores[i], k) for i in range(len(queries))]
            else:
                scores, ranked = None, [[] for _ in queries]
        results = []
        for i, query in enumerate(queries):
            hits = []
            for rank, f in enumerate(list(ranked[i]), start=1):
                triple = g.data.facts[f]
                docs = [g.store.docs[row] for row in g.data.fact_docs[f]]
                hits.append(
                    Hit(
                        doc_id=fact_id(triple),
                        title=docs[0].title if docs else "",
                        text=" | ".join(triple),
                        score=float(scores[i, f]),
                        source=self.name,
                        mode=self.mode,
                        rank=rank,
                        metadata={"triple": list(triple), "doc_ids": [d.doc_id for d in docs]},
                    )
                )
            results.append(QueryResult(query=query, source=self.name, hits=hits, latency_ms=sw.ms / len(queries)))
        return results
