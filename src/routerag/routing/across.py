"""One query routed across the choices offered: the profiles of mounted sources (the modes of an
index, named by mode; the sources of a multi-source set) or any other named choices (a LlamaIndex
selector's tools). The one code path hard-route, RealRoute and the framework integrations route
by; a router that answers a choice it was not offered is a :class:`RoutingError`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from routerag.routing.base import Router, RouteResult, RoutingError

if TYPE_CHECKING:
    from routerag.sources.sourceset import SourceSet


def route_choices(router: Router, query: str, choices: Mapping[str, str]) -> RouteResult:
    """``router``'s decision for ``query`` over ``choices`` (name -> profile text), checked to be
    one of them."""
    if not choices:
        raise RoutingError("routing needs at least one choice")
    result = router.route(query, choices)
    if result.choice not in choices:
        raise RoutingError(f"router {router.name!r} chose {result.choice!r}, which is not among the choices "
                           f"{', '.join(choices)}")
    return result


def source_profiles(sources: SourceSet, names: Sequence[str] | None = None) -> dict[str, str]:
    """The profiles of the mounted sources ``names`` (default: every one); an unmounted name is a
    :class:`~routerag.sources.base.RetrievalError` naming the mounted ones."""
    if names is None:
        return sources.profiles()
    return {name: sources.get(name).profile for name in dict.fromkeys(names)}


def route_sources(router: Router, query: str, sources: SourceSet, names: Sequence[str] | None = None) -> RouteResult:
    """``router``'s decision for ``query`` across the mounted sources ``names`` (default: every
    one), routed by their profiles."""
    return route_choices(router, query, source_profiles(sources, names))
