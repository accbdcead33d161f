"""Real retrieval as the observations of golden hops (:class:`Grounder`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from routerag.trace import Hit
from routerag.train.golden.schema import GoldenHop


class GroundingStats(BaseModel):
    """How the hops of golden trajectories were grounded in real retrieval."""

    hops: int = 0
    retrieved: dict[str, int] = Field(default_factory=dict)  # mode -> hops whose gold came back in top k
    switched: int = 0  # hops whose planned mode missed the gold but another mode found it
    injected: int = 0  # hops where no mode found the gold: the gold replaced one of the planned mode's hits
    skipped: int = 0  # hops left out (routing="outcome"): their gold paragraph was already in an earlier observation

    @property
    def retrieved_total(self) -> int:
        return sum(self.retrieved.values())


GroundingRouting = Literal["planned", "outcome"]


def same_doc(a: Hit, b: Hit) -> bool:
    """Whether two hits are the same paragraph: the same doc id, or the same title and opening text
    (gold paragraphs and retrieved ones may carry different ids)."""
    return a.doc_id == b.doc_id or (a.title == b.title and a.text.strip()[:200] == b.text.strip()[:200])


class Grounder:
    """Replaces each hop's gold-only evidence by the top-``k`` hits that real retrieval returns
    for the hop's query, so that SFT observations look like inference observations.

    The query is cleaned exactly as RouteRAG's :class:`~routerag.strategies.routerag.ModeRouter`
    cleans it. The hop's planned mode is searched first; when its top ``k`` misses the gold
    paragraph the other modes are tried (the hop's mode tag follows the mode that found it);
    when none finds it, the gold paragraph replaces one of the planned mode's hits (at a position
    fixed by the question, not always first), so the trajectory stays answerable.

    ``routing="outcome"`` makes the trajectory follow retrieval outcomes instead of the plan:
    each hop's modes are tried cheapest first (``mode_cost``, the prices the cost reward charges),
    so its tag is the cheapest mode that actually returns the gold paragraph; and a hop whose gold
    paragraph already came back in an earlier observation is left out (the episode answers
    sooner). What the policy imitates is then where the evidence was found and when it was
    complete, not a fixed passage-then-graph pattern."""

    def __init__(self, sources: Any, *, k: int = 3, mode_sources: dict[str, str] | None = None,
                 modes: Sequence[str] = ("passage", "graph", "hybrid"), max_query_chars: int = 300,
                 routing: GroundingRouting = "planned", mode_cost: Mapping[str, float] | None = None) -> None:
        self.sources = sources
        self.k = k
        self.mode_sources = mode_sources or {m: m for m in modes}
        mounted = set(sources.names())
        self.modes = [m for m in modes if self.mode_sources.get(m) in mounted]
        if not self.modes:
            raise ValueError(f"none of the modes {list(modes)} is mounted; mounted: {sorted(mounted)}")
        self.max_query_chars = max_query_chars
        self.routing = routing
        if routing == "outcome":
            from routerag.train.rewards import DEFAULT_MODE_COST

            prices = dict(DEFAULT_MODE_COST if mode_cost is None else mode_cost)
            rank = {m: i for i, m in enumerate(self.modes)}  # ties keep the given order
            self.modes.sort(key=lambda m: (prices.get(m, float("inf")), rank[m]))
        self.stats = GroundingStats()
        self._cache: dict[tuple[str, str], list[Hit]] = {}  # (mode, cleaned query) -> hits, from prefetch

    def _search(self, query: str, mode: str) -> list[Hit]:
        cached = self._cache.get((mode, query))
        if cached is not None:
            return list(cached)
        return list(self.sources.search_one(query, self.k, self.mode_sources[mode]).hits)

    def _planned(self, question: str, hop: GoldenHop) -> tuple[str, str]:
        """The hop's cleaned query and the mode searched first."""
        from routerag.runtime.parsing import clean_query

        query, _ = clean_query(hop.query, question, self.max_query_chars)
        if self.routing == "outcome":
            return query, self.modes[0]
        return query, hop.mode if hop.mode in self.modes else self.modes[0]

    def prefetch(self, episodes: Iterable[tuple[str, Sequence[GoldenHop]]], *, batch_size: int = 64) -> int:
        """Search every hop's cleaned query in its planned mode in batches (one batched search
        per mode and ``batch_size`` queries: the embedder and the index see many queries at once)
        and keep the hits for :meth:`__call__`; the fallback modes of a hop whose planned mode
        misses the gold are still searched one by one. Returns the number of queries searched."""
        wanted: dict[str, dict[str, None]] = {}  # mode -> queries, ordered and unique
        for question, hops in episodes:
            for hop in hops:
                query, mode = self._planned(question, hop)
                if (mode, query) not in self._cache:
                    wanted.setdefault(mode, {})[query] = None
        searched = 0
        for mode, unique in wanted.items():
            queries, source = list(unique), self.mode_sources[mode]
            for start in range(0, len(queries), batch_size):
                chunk = queries[start:start + batch_size]
                for query, result in zip(chunk, self.sources.search(chunk, self.k, [source]).results[source]):
                    self._cache[(mode, query)] = list(result.hits)
                searched += len(chunk)
        return searched

    def __call__(self, question: str, hops: Sequence[GoldenHop]) -> list[GoldenHop]:
        out: list[GoldenHop] = []
        seen: list[Hit] = []
        for n, hop in enumerate(hops):
            self.stats.hops += 1
            gold = hop.evidence[0] if hop.evidence else None
            if self.routing == "outcome" and out and gold is not None and any(same_doc(h, gold) for h in seen):
                self.stats.skipped += 1
                continue
            query, planned = self._planned(question, hop)
            order = [planned, *(m for m in self.modes if m != planned)]
            first_hits: list[Hit] | None = None
            chosen: tuple[str, list[Hit]] | None = None
            for mode in order:
                hits = self._search(query, mode)
                first_hits = hits if first_hits is None else first_hits
                if gold is None or any(same_doc(h, gold) for h in hits):
                    chosen = (mode, hits)
                    break
            if chosen is not None:
                mode, hits = chosen
                self.stats.retrieved[mode] = self.stats.retrieved.get(mode, 0) + 1
                self.stats.switched += mode != planned
            else:
                mode, hits = planned, list(first_hits or [])
                at = (len(question) + n) % self.k
                hits = [h for h in hits if not same_doc(h, gold)][: self.k - 1]  # type: ignore[arg-type]
                hits.insert(min(at, len(hits)), gold)  # type: ignore[arg-type]
                self.stats.injected += 1
            seen += hits
            out.append(hop.model_copy(update={"mode": mode, "query": query, "evidence": hits}))
        return out
