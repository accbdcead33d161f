"""The ``profile-embedding`` router: the choice whose profile is most similar to the query
(cosine of the bundled sentence embedder; :func:`routerag.routing.source_routing.embedding_route`)."""

from __future__ import annotations

from collections.abc import Mapping

from routerag.routing.base import RouterDeps, RouteResult, ranked_by_score


class ProfileEmbeddingRouter:
    name = "profile-embedding"

    def __init__(self, embedder=None) -> None:
        self.embedder = embedder

    def route(self, query: str, choices: Mapping[str, str]) -> RouteResult:
        from routerag.routing.source_routing import embedding_route

        decision, sims = embedding_route(query, choices, self.embedder)
        return RouteResult(ranked=ranked_by_score(sims, first=decision.source), reason=decision.reason,
                           format_error=decision.format_error, metadata={"router": self.name, "similarity": sims})


def profile_router(deps: RouterDeps) -> ProfileEmbeddingRouter:
    return ProfileEmbeddingRouter()
