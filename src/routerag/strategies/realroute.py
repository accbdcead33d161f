"""RealRoute: retrieve from every source in parallel, then keep evidence under the Adaptive Cap.

Per sub-query a routing call over the source profiles names a *preferred* source (a soft
preference, not a hard choice); every source is searched concurrently (``top_k_per_source``
each); up to ``preferred_cap`` hits of the preferred source and ``other_cap`` of each other
source survive; a selector orders them and keeps ``keep_k``. Answering, reflection and fusion
are the shared :mod:`routerag.strategies.sieve` pipeline.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import BaseModel, Field

from routerag.registry import RegisteredName
from routerag.runtime.base import StrategyContext
from routerag.runtime.loop import LoopStrategy, add_step, retrieve_step
from routerag.strategies.adaptive_cap import CapQuota, apply_cap
from routerag.strategies.selectors import SELECTORS, SelectionRequest
from routerag.strategies.sieve import SieveParams, SievePipeline, route_step, searchable
from routerag.trace import Hit, SubQueryRef, Trace
from routerag.trace import Selection as TraceSelection


class RealRouteParams(SieveParams):
    top_k_per_source: int = Field(default=8, ge=1, le=100, description="hits retrieved from each source")
    keep_k: int = Field(default=8, ge=1, description="evidence items kept in total")
    selector: Annotated[str, RegisteredName(SELECTORS)] = Field(default="score", description="score | norm_score | routing_weighted | rrf | llm (SELECTORS)")
    adaptive_cap: bool = Field(default=True, description="route to a preferred source and apply per-source quotas")
    preferred_cap: int = Field(default=5, ge=0, description="hits kept from the preferred source")
    other_cap: int = Field(default=2, ge=0, description="hits kept from each other source")
    preferred_weight: float = Field(default=1.5, ge=0.0, description="routing_weighted: weight of the preferred source")
    other_weight: float = Field(default=1.0, ge=0.0, description="routing_weighted: weight of the other sources")
    rrf_k: int = Field(default=60, ge=1, description="rrf: the constant in 1 / (rrf_k + rank)")

    @property
    def routes(self) -> bool:
        return self.adaptive_cap or self.selector == "routing_weighted"


class AllSourcesGatherer:
    """Search every mounted source, cap per source, select."""

    def __init__(self, context: StrategyContext, params: RealRouteParams) -> None:
        self.context = context
        self.params = params

    def route(self, trace: Trace, subquery_id: str, query: str) -> str | None:
        if not self.params.routes:
            return None
        return route_step(self.context, self.params, trace, subquery_id, query)

    def gather(self, trace: Trace, subquery_id: str, query: str, source: str | None) -> list[Hit]:
        p = self.params
        names = self.context.sources.names()
        search = retrieve_step(
            self.context,
            trace,
            searchable(query),
            names,
            p.top_k_per_source,
            lambda hits: "",  # the kept evidence is shown in the answer step
            subquery=SubQueryRef(id=subquery_id, preferred_source=source),
        )
        candidates = search.hits
        if p.adaptive_cap and source is not None:
            candidates = apply_cap(candidates, source, CapQuota(preferred_cap=p.preferred_cap, other_cap=p.other_cap))
        request = SelectionRequest(
            query=query,
            hits=candidates,
            keep_k=p.keep_k,
            preferred_source=source,
            preferred_weight=p.preferred_weight,
            other_weight=p.other_weight,
            rrf_k=p.rrf_k,
        )
        selection = SELECTORS.get(p.selector)(request, self.context)
        add_step(
            trace,
            "select",
            query=query,
            sources=names,
            model_calls=selection.model_calls,
            raw_output=selection.raw_output,
            format_error=selection.format_error,
            selection=TraceSelection(selector=p.selector, candidates=len(candidates), kept=[h.doc_id for h in selection.hits],
                                     kept_sources=[h.source for h in selection.hits], fallback=selection.fallback or None),
            subquery=SubQueryRef(id=subquery_id, preferred_source=source),
        )
        return selection.hits


class RealRoute(LoopStrategy):
    """Decompose, retrieve from all sources, keep evidence under the Adaptive Cap, answer, reflect, fuse."""

    name: ClassVar[str] = "realroute"
    revision: ClassVar[int] = 1  # 1: a plan copying the prompt's example ("<film>") falls back to the question
    Params: ClassVar[type[BaseModel]] = RealRouteParams

    def execute(self, trace: Trace) -> None:
        gatherer = AllSourcesGatherer(self.context, self.params)  # type: ignore[arg-type]
        SievePipeline(self.context, self.params, gatherer).execute(trace)  # type: ignore[arg-type]

