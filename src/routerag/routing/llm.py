"""The ``llm`` router (the papers'): one model call over the source profiles; the reply names one
source (:func:`routerag.routing.source_routing.parse_route`), which ranks first with score 1."""

from __future__ import annotations

from collections.abc import Mapping

from routerag.routing.base import RouterDeps, RouteResult, RoutingError, ranked_by_score


class LLMRouter:
    name = "llm"

    def __init__(self, context, generation) -> None:
        self.context = context
        self.generation = generation

    def route(self, query: str, choices: Mapping[str, str]) -> RouteResult:
        from routerag.routing.source_routing import parse_route, route_messages
        from routerag.runtime.loop import call_model, generated_text

        response, call = call_model(self.context, route_messages(query, choices), self.generation, "route")
        text = generated_text(response)
        decision = parse_route(text, list(choices))
        scores = {n: float(n == decision.source) for n in choices}
        return RouteResult(ranked=ranked_by_score(scores, first=decision.source), reason=decision.reason,
                           format_error=decision.format_error, raw_output=text, model_calls=[call])


def llm_router(deps: RouterDeps) -> LLMRouter:
    if deps.context is None or deps.generation is None:
        raise RoutingError("the llm router needs a model (a strategy context) and generation settings")
    return LLMRouter(deps.context, deps.generation)
