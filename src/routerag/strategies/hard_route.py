"""DeepSieve's hard routing (the baseline RealRoute is compared with): per sub-query ONE source is
chosen by an LLM call over the source profiles *before* retrieval, and only that source is
searched. A failed sub-answer triggers reflection, which may rewrite the query and switch source.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field

from routerag.runtime.base import StrategyContext
from routerag.runtime.loop import LoopStrategy, retrieve_step
from routerag.strategies.sieve import SieveParams, SievePipeline, route_step, searchable
from routerag.trace import Hit, SubQueryRef, Trace


class HardRouteParams(SieveParams):
    top_k: int = Field(default=5, ge=1, le=100, description="hits retrieved from the chosen source")


class ChosenSourceGatherer:
    def __init__(self, context: StrategyContext, params: HardRouteParams) -> None:
        self.context = context
        self.params = params

    def route(self, trace: Trace, subquery_id: str, query: str) -> str | None:
        return route_step(self.context, self.params, trace, subquery_id, query)

    def gather(self, trace: Trace, subquery_id: str, query: str, source: str | None) -> list[Hit]:
        if source is None:  # pragma: no cover - route() always answers
            raise ValueError("hard routing needs a chosen source")
        step = retrieve_step(
            self.context,
            trace,
            searchable(query),
            [source],
            self.params.top_k,
            lambda hits: "",  # the evidence is shown in the answer step
            subquery=SubQueryRef(id=subquery_id, preferred_source=source),
        )
        return step.hits


class HardRoute(LoopStrategy):
    """Decompose, route each sub-query to one source, retrieve there only, answer, reflect, fuse."""

    name: ClassVar[str] = "hard-route"
    revision: ClassVar[int] = 1  # 1: a plan copying the prompt's example ("<film>") falls back to the question
    Params: ClassVar[type[BaseModel]] = HardRouteParams

    def execute(self, trace: Trace) -> None:
        gatherer = ChosenSourceGatherer(self.context, self.params)  # type: ignore[arg-type]
        SievePipeline(self.context, self.params, gatherer).execute(trace)  # type: ignore[arg-type]
