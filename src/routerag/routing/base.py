"""The router interface: ``route(query, choices) -> RouteResult`` (choices ranked best first,
with scores), whatever decides it (a model call, profile similarity, a trained classifier)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from routerag.registry import Registry, callables_taking
from routerag.routing.errors import RoutingError
from routerag.trace import ModelCall, Route

if TYPE_CHECKING:
    from routerag.llm.base import GenerationParams
    from routerag.routing.keyword_rules import KeywordRules
    from routerag.runtime.base import StrategyContext


class RouteChoice(BaseModel):
    name: str
    score: float


class RouteResult(BaseModel):
    """A routing decision: every choice ranked (the decision first) with the router's scores."""

    ranked: list[RouteChoice] = Field(min_length=1)
    reason: str = ""
    format_error: str | None = None
    raw_output: str | None = None
    model_calls: list[ModelCall] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)  # the router's own record; router_model becomes Route.model

    @property
    def choice(self) -> str:
        return self.ranked[0].name

    @property
    def scores(self) -> dict[str, float]:
        return {c.name: c.score for c in self.ranked}

    def as_route(self, chosen_by: str) -> Route:
        """The decision as a trace step's route record (``chosen_by``: the router's name)."""
        model = self.metadata.get("router_model")
        return Route(choice=self.choice, chosen_by=chosen_by, reason=self.reason, scores=self.scores,
                     model=model if isinstance(model, str) else None)


@runtime_checkable
class Router(Protocol):
    name: str

    def route(self, query: str, choices: Mapping[str, str]) -> RouteResult:
        """Rank ``choices`` (name -> profile text; may be empty) for ``query``."""
        ...


@dataclass
class RouterDeps:
    """What a router may need to be built: the strategy's context and generation settings (the
    LLM router), the learned router's model (a name of a shipped model, or a directory) and its
    cost margin, the keyword router's rules."""

    context: StrategyContext | None = None
    generation: GenerationParams | None = None
    model: str | None = None
    margin: float = 0.0
    rules: KeywordRules | None = None


ROUTERS: Registry[Callable[[RouterDeps], Router]] = Registry("router", callables_taking("deps: RouterDeps"))


def build_router(name: str, deps: RouterDeps | None = None) -> Router:
    """The router registered as ``name``, built with ``deps``; a factory that builds something
    else than a :class:`Router` is a :class:`RoutingError`."""
    router = ROUTERS.get(name)(deps or RouterDeps())
    if not isinstance(router, Router):
        raise RoutingError(f"router {name!r}: its factory built {type(router).__name__}, not a Router (name, route)")
    return router


def ranked_by_score(scores: Mapping[str, float], first: str | None = None) -> list[RouteChoice]:
    """Choices by descending score (ties: the order given); ``first`` (the decision) leads."""
    order = sorted(scores, key=lambda n: -scores[n])
    if first is not None:
        order = [first, *(n for n in order if n != first)]
    return [RouteChoice(name=n, score=float(scores[n])) for n in order]
