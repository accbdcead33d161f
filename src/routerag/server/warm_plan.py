"""What the warm-up (:mod:`routerag.server.warmup`) loads for a strategy: the strategy prepared
with its default params (as ``/v1/models`` and a request without params prepare it: the shipped
policy adapter unpacked), the model the service's pool gives it (built, its weights loaded), and
one search of each mounted source its params name (which loads a lazily built index: the dense
encoder, the graph)."""

from __future__ import annotations

from collections.abc import Callable

from routerag.edge.asks import Preparation, Prepared, PreparedStrategy, StrategyConfig
from routerag.llm.base import ChatModel
from routerag.run.assemble import StrategyRequestError
from routerag.server.upload_parse import UploadRejected
from routerag.server.warmup import Plan, WarmUpPart, WarmUpSkipped
from routerag.sources.sourceset import SourceSet
from routerag.strategies import STRATEGIES

__all__ = ["WARM_UP_QUERY", "strategy_plan"]

WARM_UP_QUERY = "warm-up"


def _prepared(name: str, prepare: Preparation) -> Prepared:
    if name not in STRATEGIES.names():
        raise StrategyRequestError(f"unknown strategy {name!r}")  # a misconfiguration: the warm-up fails
    try:
        STRATEGIES.get(name)
    except ImportError as exc:
        raise WarmUpSkipped(f"{name} is not available here: {exc}") from None
    try:
        return prepare(StrategyConfig(strategy=name))
    except (StrategyRequestError, UploadRejected) as exc:  # its defaults need something this service lacks
        raise WarmUpSkipped(f"{name} cannot run on this service's defaults: {exc}") from None


def _search(sourceset: SourceSet, source: str) -> Callable[[], object]:
    return lambda: sourceset.search_one(WARM_UP_QUERY, 1, source)


def strategy_plan(name: str, prepare: Preparation, model_for: Callable[[PreparedStrategy], ChatModel]) -> Plan:
    """The warm-up plan of strategy ``name`` on this service: its model, then its mounted sources."""

    def plan() -> list[WarmUpPart]:
        prepared = _prepared(name, prepare)
        strategy, sourceset = prepared.strategy, prepared.sources
        mounted = set(sourceset.names())
        label = strategy.adapter or "the base model"
        parts = [WarmUpPart(f"model ({label})", lambda: model_for(strategy))]
        parts += [WarmUpPart(f"source {source}", _search(sourceset, source))
                  for source in strategy.named_sources() if source in mounted]
        return parts

    return plan
