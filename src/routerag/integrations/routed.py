"""What the routing retrievers (LangChain, LlamaIndex) and the MCP ``route`` tool do, without any
framework: route one query across mounted sources (the modes of an index, or any
:class:`~routerag.sources.sourceset.SourceSet`) with a routerag router
(:func:`~routerag.routing.across.route_sources`, the code path hard-route routes by), then search
the chosen source. The result keeps the decision: the chosen source, the router's reason and its
score of every choice, best first."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from routerag.routing.base import RouteChoice, Router
from routerag.trace import Hit, Route

if TYPE_CHECKING:
    from routerag.routing.keyword_rules import KeywordRules
    from routerag.sources.sourceset import SourceSet

DEFAULT_ROUTER = "learned"  # the shipped mode router covers an index's passage, bm25, graph and hybrid modes


class RoutedSearch(BaseModel):
    """One query routed across sources and searched where it went."""

    query: str
    source: str = Field(description="the source the router chose (for an index, its mode)")
    hits: list[Hit] = Field(description="the chosen source's hits (title, text, score, source, mode, doc_id, 1-based rank, metadata)")
    route: Route = Field(description="the decision: choice, chosen_by (the router), reason, scores of every choice")
    ranked: list[RouteChoice] = Field(description="every choice with the router's score, the decision first")
    latency_ms: float = Field(description="routing and search together")


def make_router(router: str | Router, *, model: str | None = None, margin: float = 0.0,
                rules: KeywordRules | str | Path | None = None) -> Router:
    """``router`` itself, or the router registered under that name built with
    :func:`~routerag.routing.build_router`: ``model`` and ``margin`` for ``learned``, ``rules`` (a
    :class:`~routerag.routing.keyword.KeywordRules` or a rules file) for ``keyword``. An unknown
    name or a router that cannot be built is a ``ValueError`` saying why."""
    from routerag.registry import UnknownNameError
    from routerag.routing import Router, RouterDeps, build_router
    from routerag.routing.base import RoutingError
    from routerag.routing.keyword import load_rules

    if not isinstance(router, str):
        if not isinstance(router, Router):
            raise RoutingError(f"expected a router name or a routerag Router (name, route), got {type(router).__name__}")
        return router
    loaded = load_rules(rules) if isinstance(rules, str | Path) else rules
    try:
        return build_router(router, RouterDeps(model=model, margin=margin, rules=loaded))
    except UnknownNameError as exc:
        raise RoutingError(str(exc)) from None


def check_sources(sources: object) -> SourceSet:
    from routerag.sources.sourceset import SourceSet

    if not isinstance(sources, SourceSet) or not sources.names():
        raise ValueError(f"expected a routerag SourceSet with at least one source, got {type(sources).__name__}")
    return sources


def check_choices(sources: SourceSet, choices: Sequence[str] | None) -> list[str] | None:
    """``choices`` (the sources to route across), each a mounted source; ``None``: every one."""
    if choices is None:
        return None
    if not choices:
        raise ValueError("choices: name at least one source to route across, or None for every mounted one")
    for name in choices:
        sources.get(name)  # an unmounted one: a RetrievalError naming the mounted ones
    return list(choices)


def route_and_search(router: Router, sources: SourceSet, query: str, k: int,
                     names: Sequence[str] | None = None) -> RoutedSearch:
    """Route ``query`` across the mounted sources ``names`` (default: every one), then search the
    chosen one for ``k`` hits. An empty query or ``k`` out of range is a ``ValueError``
    (:class:`~routerag.api.indexing.RetrievalRequestError`); so is a router's failure
    (:class:`~routerag.routing.base.RoutingError`)."""
    from routerag.api.indexing import retrieval_request
    from routerag.routing.across import route_sources

    start = time.perf_counter()
    result = route_sources(router, query, sources, names)
    found = sources.retrieve(retrieval_request([query], k, [result.choice])).results[result.choice][0]
    return RoutedSearch(query=query, source=result.choice, hits=found.hits, route=result.as_route(router.name),
                        ranked=result.ranked, latency_ms=round(1000 * (time.perf_counter() - start), 2))


def route_metadata(routed: RoutedSearch) -> dict[str, Any]:
    """The decision as a retrieved document's ``route`` metadata: ``choice``, ``router``,
    ``reason``, ``scores`` (every choice's) and ``ranked`` (the choices best first), and the
    learned router's ``model`` when it has one."""
    meta: dict[str, Any] = {"choice": routed.route.choice, "router": routed.route.chosen_by,
                            "reason": routed.route.reason, "scores": dict(routed.route.scores),
                            "ranked": [choice.name for choice in routed.ranked]}
    if routed.route.model:
        meta["model"] = routed.route.model
    return meta
