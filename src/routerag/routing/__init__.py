"""Routers: one interface (a query and the choices' profiles -> choices ranked with scores) behind
one registry. Built-ins are registered lazily (``"module:factory"``):

* ``llm`` - one model call over the source profiles (the papers' router);
* ``profile-embedding`` - the profile most similar to the query (no model call);
* ``learned`` - a small classifier trained on retrieval outcomes (no model call; see
  :mod:`routerag.routing.learned`);
* ``keyword`` - the operator's ordered regular-expression rules, the first match decides (no model
  call; :mod:`routerag.routing.keyword`).
"""

from typing import Annotated

from routerag.provenance import NameOrPath
from routerag.routing.base import ROUTERS, RouteChoice, Router, RouterDeps, RouteResult, build_router

_BUILTINS = {
    "llm": "routerag.routing.llm:llm_router",
    "profile-embedding": "routerag.routing.profile:profile_router",
    "learned": "routerag.routing.learned:learned_router",
    "keyword": "routerag.routing.keyword:keyword_router",
}

for _name, _path in _BUILTINS.items():
    if _name not in ROUTERS:
        ROUTERS.register(_name, _path)


def shipped_router_names() -> list[str]:
    """The names of the router models shipped with the package (``data/routers/<name>``)."""
    from routerag.routing.learned import shipped_models

    return sorted(shipped_models())


RouterModel = Annotated[str, NameOrPath("router model", shipped_router_names)]
"""A learned router's model: a shipped one's name or a model folder (from a request: one inside the
service's data folder)."""

__all__ = ["ROUTERS", "RouteChoice", "RouteResult", "Router", "RouterDeps", "RouterModel", "build_router"]
