"""Graph retrieval (HippoRAG 2): query -> facts -> seed entities (+ dense passage prior) ->
personalized PageRank -> passages ranked by PPR mass.

Per query (all queries of a call are embedded, scored and propagated as one batch):

1. cosine of the query with every fact embedding, min-max normalised; the top ``fact_topk`` facts;
2. optionally the recognition-memory filter (only when a chat model is given);
3. reset weights: each kept fact's subject and object get ``score / (#passages of the entity)``,
   averaged over the facts naming it; every passage node gets its min-max normalised dense score
   times ``passage_node_weight``;
4. PPR with ``damping`` over the undirected weighted graph; passages ranked by their PPR score.

For large graphs each step has an approximation, off by default (``graph.ann=ivf``: step 1 through
a FAISS IVF index; ``graph.prior_topk``: step 3's prior on the top passages only;
``graph.ppr=local``: step 4 by forward push from the reset's support); see docs/guides/scaling.md.

No fact (empty graph, or the filter rejected all) -> the dense passage ranking, with
``QueryResult.metadata["fallback"] = "dense"``. ``QueryResult.metadata`` carries the kept facts,
the seed entities and the top PPR nodes for display (a search step records them as
:class:`routerag.trace.GraphRetrieval`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from routerag.index.graph import GraphIndex
from routerag.index.threads import single_threaded_blas
from routerag.index.vector_topk import top_rows
from routerag.sources.base import BaseSource, QueryResult, Stopwatch
from routerag.trace import Hit

if TYPE_CHECKING:
    from routerag.index.bundle import IndexBundle
    from routerag.llm.base import ChatModel

N_DISPLAY = 10  # seeds / top nodes reported per query


def min_max(scores: np.ndarray) -> np.ndarray:
    """Row-wise min-max normalisation to [0, 1]; a constant row becomes all ones."""
    scores = np.asarray(scores, dtype=np.float64)
    low = scores.min(axis=-1, keepdims=True)
    span = scores.max(axis=-1, keepdims=True) - low
    return np.where(span > 0, (scores - low) / np.where(span > 0, span, 1.0), 1.0)


class _PassagePrior:
    """The queries' dense passage scores: every passage's (``topk == 0``, exact) or only the top
    ``topk`` passages' (from ``graph.vector_search("passages")``, normalised between the sampled
    minimum and the best), with the dense score of any other row computed when a hit needs it."""

    def __init__(self, graph: GraphIndex, vectors: np.ndarray, topk: int) -> None:
        self.graph, self.vectors = graph, vectors
        self.topk = min(topk, graph.n_passages)
        if not topk:
            self.dense = np.ascontiguousarray((graph.data.passage_vecs @ vectors.T).T)  # (B, N); faster operand order for small B
            self.norm = min_max(self.dense) if graph.n_passages else self.dense
        else:
            search = graph.vector_search("passages")
            self.top_scores, self.top_rows = search.search(vectors, self.topk)
            self.low = search.low(vectors)

    def reset(self, i: int, weight: float) -> tuple[np.ndarray, np.ndarray]:
        """Passage rows and their reset weights (``weight`` x the normalised dense score)."""
        if not self.topk:
            return np.arange(self.graph.n_passages), self.norm[i] * weight
        keep = self.top_rows[i] >= 0
        rows, scores = self.top_rows[i][keep], self.top_scores[i][keep].astype(np.float64)
        if not len(rows):
            return rows, scores
        low = min(float(self.low[i]), float(scores.min()))
        span = float(scores[0]) - low
        norm = (scores - low) / span if span > 0 else np.ones(len(rows))
        return rows, norm * weight

    def top(self, i: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The dense ranking's top ``k`` rows and scores (the no-fact fallback)."""
        if not self.topk:
            rows = top_rows(self.dense[i], k)
            return rows, self.dense[i][rows]
        scores, rows = self.top_scores[i], self.top_rows[i]
        if k > self.topk:  # more than the prior holds: search again for this query
            found = self.graph.vector_search("passages").search(self.vectors[i : i + 1], k)
            scores, rows = found[0][0], found[1][0]
        keep = rows >= 0
        return rows[keep][:k], scores[keep][:k]

    def scores(self, i: int, rows: np.ndarray) -> np.ndarray:
        if not self.topk:
            return self.dense[i][rows]
        return self.graph.data.passage_vecs[rows] @ self.vectors[i]


def _top_passages(rows: np.ndarray, scores: np.ndarray, k: int, n_passages: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` of the touched passages ``rows`` (sorted); if fewer than ``k`` were touched,
    the lowest untouched rows follow with score 0 (as the exact ranking orders zero-score ties)."""
    best = top_rows(scores, k)
    rows, scores = rows[best], scores[best]
    need = min(k, n_passages) - len(rows)
    if need > 0:
        extra = np.setdiff1d(np.arange(min(n_passages, k + len(rows))), rows)[:need]
        rows, scores = np.concatenate([rows, extra]), np.concatenate([scores, np.zeros(len(extra))])
    return rows, scores


class GraphSource(BaseSource):
    """Passages ranked by HippoRAG 2 personalized PageRank over a :class:`GraphIndex`."""

    requires: ClassVar[tuple[str, ...]] = ("graph",)
    default_mode: ClassVar[str] = "graph"

    def __init__(
        self,
        graph: GraphIndex,
        *,
        name: str | None = None,
        mode: str | None = None,
        profile: str | None = None,
        recognition_model: "ChatModel | None" = None,
        fact_topk: int | None = None,
        passage_node_weight: float | None = None,
        ppr: Literal["power", "local", "igraph"] | None = None,
        prior_topk: int | None = None,
    ) -> None:
        settings = graph.settings.graph
        self.graph = graph
        self._identify(name, mode, profile, f"knowledge graph over {graph.n_passages} passages ({graph.n_entities} "
                       f"entities, {len(graph.data.facts)} facts); multi-hop, entity-centric questions")
        self.fact_topk = fact_topk or settings.fact_topk
        self.passage_node_weight = settings.passage_node_weight if passage_node_weight is None else passage_node_weight
        self.ppr = ppr or settings.ppr  # "igraph": the reference solver, for tests and benchmarks
        self.prior_topk = settings.prior_topk if prior_topk is None else prior_topk
        self.recognition = None
        if recognition_model is not None:
            from routerag.sources.recognition import FactRecognizer

            self.recognition = FactRecognizer(recognition_model)

    @classmethod
    def from_bundle(cls, bundle: "IndexBundle", *, name: str | None = None, profile: str | None = None) -> "GraphSource":
        return cls(bundle.component("graph"), name=name, profile=profile)

    # ---------------------------------------------------------------- search
    def _search(self, queries: list[str], k: int) -> list[QueryResult]:
        with Stopwatch() as sw:
            vectors = self.graph.embed_queries(queries)
            with single_threaded_blas():  # the score products and PPR; see routerag.index.threads
                ranked = self.rank(queries, k, vectors=vectors)
        share = sw.ms / len(queries)
        return [
            QueryResult(query=q, source=self.name, hits=hits, latency_ms=share, metadata=meta)
            for q, (hits, meta) in zip(queries, ranked)
        ]

    def rank(
        self, queries: Sequence[str], k: int, vectors: np.ndarray | None = None
    ) -> list[tuple[list[Hit], dict[str, Any]]]:
        """Hits and display metadata per query; ``vectors`` are the queries' embeddings if the
        caller already has them."""
        g = self.graph
        if vectors is None:
            vectors = g.embed_queries(queries)
        prior = _PassagePrior(g, vectors, self.prior_topk)
        facts = self._fact_candidates(vectors)

        out: list[tuple[list[Hit], dict[str, Any]] | None] = [None] * len(queries)
        seeds_of: list[tuple[np.ndarray, np.ndarray]] = []
        pending: list[tuple[int, dict[str, Any]]] = []
        for i, query in enumerate(queries):
            meta: dict[str, Any] = {"kind": "graph", "fallback": None}  # a trace.GraphRetrieval
            candidates, raw, low, span = facts[i]
            if self.recognition is not None and len(candidates):
                result = self.recognition(query, [g.data.facts[f] for f in candidates])
                meta["recognition"] = {
                    "before": len(candidates),
                    "after": len(result.kept),
                    "error": result.error,
                    "call": result.call.model_dump() if result.call else None,
                }
                candidates, raw = candidates[result.kept], raw[result.kept]
            weights = (raw - low) / span if span > 0 else np.ones(len(candidates))
            meta["facts"] = [
                {"triple": list(g.data.facts[f]), "score": float(s), "weight": float(w)}
                for f, s, w in zip(candidates.tolist(), raw.tolist(), weights.tolist())
            ]
            entities, entity_weights = self._entity_weights(candidates, weights)
            if not entity_weights.any():
                meta["fallback"] = "dense"
                rows, scores = prior.top(i, k)
                out[i] = (self._hits(rows, scores, scores), meta)
                continue
            order = np.lexsort((entities, -entity_weights))[:N_DISPLAY]  # best first, ties: lower row first
            meta["seeds"] = [
                {"node": g.data.entities[e], "weight": float(w)}
                for e, w in zip(entities[order].tolist(), entity_weights[order].tolist())
                if w > 0
            ]
            seeds_of.append((entities, entity_weights))
            pending.append((i, meta))

        if pending and self.ppr == "local":
            for (i, meta), (entities, entity_weights) in zip(pending, seeds_of):
                rows, weights = prior.reset(i, self.passage_node_weight)
                nodes, node_scores = g.local_ppr.run(
                    np.concatenate([entities, rows + g.n_entities]), np.concatenate([entity_weights, weights])
                )
                passages = nodes >= g.n_entities
                rows, scores = _top_passages(nodes[passages] - g.n_entities, node_scores[passages], k, g.n_passages)
                shown = top_rows(node_scores, N_DISPLAY)
                meta["top_nodes"] = self._display(nodes[shown], node_scores[shown])
                out[i] = (self._hits(rows, scores, prior.scores(i, rows)), meta)
        elif pending:
            # reset vectors: the seed entities' weights, and the passages' dense prior
            resets = np.zeros((g.n_nodes, len(pending)))
            for column, ((i, _), (entities, entity_weights)) in enumerate(zip(pending, seeds_of)):
                resets[entities, column] = entity_weights
                rows, weights = prior.reset(i, self.passage_node_weight)
                if not prior.topk:  # every passage in row order (exact prior): a slice, not a scatter
                    resets[g.n_entities :, column] = weights
                else:
                    resets[rows + g.n_entities, column] = weights
            # one query: a 1-d vector (sparse matrix-vector products); several: one batch
            scores = self._ppr(resets[:, 0]).reshape(-1, 1) if len(pending) == 1 else self._ppr(resets)
            for column, (i, meta) in enumerate(pending):
                node_scores = scores[:, column]
                passage_scores = node_scores[g.n_entities :]
                rows = top_rows(passage_scores, k)
                top_nodes = top_rows(node_scores, N_DISPLAY)
                meta["top_nodes"] = self._display(top_nodes, node_scores[top_nodes])
                out[i] = (self._hits(rows, passage_scores[rows], prior.scores(i, rows)), meta)
        return [o for o in out if o is not None]

    def _fact_candidates(self, vectors: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, float, float]]:
        """Per query: the top ``fact_topk`` facts, their raw scores, and the row's min-max
        normalisation (low, span). Exact: a product with every fact; ``graph.ann=ivf``: the FAISS
        candidates, normalised between the sampled minimum and the best candidate."""
        g = self.graph
        n_queries = len(vectors)
        if not len(g.data.facts):
            return [(np.zeros(0, np.int64), np.zeros(0), 0.0, 0.0)] * n_queries
        if g.settings.graph.ann == "exact":
            fact_scores = np.ascontiguousarray((g.data.fact_vecs @ vectors.T).T)
            # min-max normalisation needs only each row's extremes: only the kept facts are normalised
            low = fact_scores.min(axis=1).astype(np.float64)
            span = fact_scores.max(axis=1).astype(np.float64) - low
            out = []
            for i in range(n_queries):
                rows = top_rows(fact_scores[i], self.fact_topk)
                out.append((rows, fact_scores[i, rows].astype(np.float64), float(low[i]), float(span[i])))
            return out
        search = g.vector_search("facts")
        scores, rows = search.search(vectors, self.fact_topk)
        lows = search.low(vectors)
        out = []
        for i in range(n_queries):
            keep = rows[i] >= 0
            raw = scores[i][keep].astype(np.float64)
            low = min(float(lows[i]), float(raw.min())) if len(raw) else float(lows[i])
            out.append((rows[i][keep], raw, low, float(raw.max()) - low if len(raw) else 0.0))
        return out

    def _display(self, nodes: np.ndarray, scores: np.ndarray) -> list[dict[str, Any]]:
        return [
            {"kind": kind, "node": label, "score": float(score)}
            for v, score in zip(nodes.tolist(), scores.tolist())
            for kind, label in [self.graph.node_label(int(v))]
        ]

    # ---------------------------------------------------------------- helpers
    def _entity_weights(self, facts: np.ndarray, fact_weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The seed entities of the kept ``facts`` (their subjects and objects) and their reset
        weights: each fact's weight / the entity's passage count, averaged over the facts naming
        it. Sorted by entity row; only the touched entities, not a vector over all of them."""
        if len(facts) == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        g = self.graph
        ends = g.fact_entities[facts].reshape(-1)  # subject, object of fact 0, then of fact 1, ...
        shares = np.repeat(fact_weights, 2) / np.maximum(g.entity_doc_count[ends], 1.0)
        entities, slot = np.unique(ends, return_inverse=True)
        total = np.zeros(len(entities))
        np.add.at(total, slot, shares)  # in fact order, like a loop over the facts
        return entities, total / np.bincount(slot, minlength=len(entities))

    def _ppr(self, resets: np.ndarray) -> np.ndarray:
        """PPR scores for ``(n_nodes,)`` or ``(n_nodes, batch)`` reset weights, same shape."""
        damping = self.graph.settings.graph.damping
        if self.ppr == "igraph":
            from routerag.index.ppr import igraph_ppr

            if resets.ndim == 1:
                return igraph_ppr(self.graph.graph, resets, damping)
            return np.stack([igraph_ppr(self.graph.graph, resets[:, j], damping) for j in range(resets.shape[1])], axis=1)
        return self.graph.power_ppr.run(resets)

    def _hits(self, rows: np.ndarray, scores: np.ndarray, dense: np.ndarray) -> list[Hit]:
        """``dense``: the dense score of each of ``rows``."""
        store = self.graph.store
        hits = []
        for rank, (row, score, dense_score) in enumerate(zip(rows.tolist(), scores.tolist(), dense.tolist()), start=1):
            doc = store.docs[row]
            hits.append(
                Hit(
                    doc_id=doc.doc_id,
                    title=doc.title,
                    text=doc.text,
                    score=float(score),
                    source=self.name,
                    mode=self.mode,
                    rank=rank,
                    metadata={**doc.metadata, "dense_score": float(dense_score)},
                )
            )
        return hits


class GraphPassageSource(BaseSource):
    """Dense passage ranking from the graph's own passage vectors (``mode="passage"``): the passage
    list of ``hybrid`` when the bundle has no ``dense`` component."""

    def __init__(self, graph: GraphIndex, *, name: str = "graph-passage", profile: str | None = None) -> None:
        self.graph = graph
        self.name = name
        self.mode = "passage"
        self.profile = profile or f"dense retrieval over {graph.n_passages} passages (graph vectors)"

    def _search(self, queries: list[str], k: int) -> list[QueryResult]:
        with Stopwatch() as sw:
            scores = (self.graph.data.passage_vecs @ self.graph.embed_queries(queries).T).T
            ranked = [top_rows(scores[i], k) for i in range(len(queries))]
        store = self.graph.store
        results = []
        for i, (query, rows) in enumerate(zip(queries, ranked)):
            hits = [
                Hit(
                    doc_id=store.docs[r].doc_id,
                    title=store.docs[r].title,
                    text=store.docs[r].text,
                    score=float(scores[i, r]),
                    source=self.name,
                    mode=self.mode,
                    rank=n,
                    metadata=dict(store.docs[r].metadata),
                )
                for n, r in enumerate(rows.tolist(), start=1)
            ]
            results.append(QueryResult(query=query, source=self.name, hits=hits, latency_ms=sw.ms / len(queries)))
        return results
