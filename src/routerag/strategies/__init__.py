"""Routing strategies, one module each, behind one registry.

Built-ins are registered lazily (``"module:Class"``): a strategy's module is imported only when
it is looked up with ``STRATEGIES.get(name)``."""

from routerag.runtime.base import STRATEGIES, Strategy, StrategyContext

_BUILTINS = {
    "routerag": "routerag.strategies.routerag:RouteRAG",
    "routerag-passage": "routerag.strategies.routerag:RouteRAGPassage",
    "routerag-graph": "routerag.strategies.routerag:RouteRAGGraph",
    "routerag-hybrid": "routerag.strategies.routerag:RouteRAGHybrid",
    "routerag-random": "routerag.strategies.routerag:RouteRAGRandom",
    "graphrag-r1": "routerag.strategies.graphrag_r1:GraphRAGR1",
    "r1-router": "routerag.strategies.r1_router:R1Router",
    "r1-router-step": "routerag.strategies.r1_router_step:R1RouterStep",
    "rule": "routerag.strategies.rule:Rule",
    "direct": "routerag.strategies.baselines:Direct",
    "passthrough": "routerag.strategies.passthrough:Passthrough",
    "vanilla": "routerag.strategies.baselines:Vanilla",
    "ircot": "routerag.strategies.baselines:IRCoT",
    "iter-retgen": "routerag.strategies.baselines:IterRetGen",
    "realroute": "routerag.strategies.realroute:RealRoute",
    "hard-route": "routerag.strategies.hard_route:HardRoute",
    "adaptive": "routerag.strategies.adaptive:Adaptive",
}

for _name, _path in _BUILTINS.items():
    if _name not in STRATEGIES:
        STRATEGIES.register(_name, _path)

__all__ = ["STRATEGIES", "Strategy", "StrategyContext"]
