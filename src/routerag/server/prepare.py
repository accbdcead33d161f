"""A request's configuration made runnable: a :class:`StrategyConfig` (a strategy, its params, the
uploaded sources it mounts) becomes a :class:`~routerag.strategies.prepare.PreparedStrategy` and
the ``SourceSet`` its run sees. The uploads are mounted from the service's store (a refusal:
:class:`~routerag.server.upload_parse.UploadRejected`); the strategy is prepared with the
service's limits by :func:`~routerag.strategies.prepare.prepare_strategy` (a refusal:
:class:`~routerag.strategies.prepare.StrategyRequestError`). Preparing reads files (the uploads'
indexes, an adapter unpacked): it runs in a worker thread (``Service.prepare``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from routerag.llm.config import ModelConfig
from routerag.provenance import FromRequest
from routerag.server.uploads import SourceStore
from routerag.sources.sourceset import SourceSet
from routerag.strategies import prepare as strategy_prepare
from routerag.strategies.prepare import PreparedStrategy

__all__ = ["Prepared", "PreparedStrategy", "Preparation", "StrategyConfig"]


class StrategyConfig(BaseModel):
    """One configuration of a run: a strategy, its params, the custom sources it mounts."""

    model_config = ConfigDict(extra="forbid")

    strategy: str = Field("vanilla", description="a registered strategy (GET /v1/strategies)")
    params: dict[str, Any] = Field(default_factory=dict, description="the strategy's parameters")
    sources: list[str] = Field(default_factory=list, max_length=16,
                               description="uploaded custom sources to mount next to the service's own")
    label: str | None = Field(None, max_length=80, description="its name in comparison tables")


@dataclass(frozen=True)
class Prepared:
    """A configuration made runnable: the strategy prepared and the sources its run sees."""

    strategy: PreparedStrategy
    sources: SourceSet


@dataclass(frozen=True)
class Preparation:
    """How the service prepares a configuration: ``base`` (its own sources) plus the uploads from
    ``store``; its token limit, model configuration and what a request may name (``request``)."""

    store: SourceStore
    base: SourceSet
    max_new_tokens: int
    model: ModelConfig | None
    request: FromRequest

    def __call__(self, config: StrategyConfig) -> Prepared:
        sourceset = self.store.mount(self.base, config.sources)
        prepared = strategy_prepare.prepare_strategy(config.strategy, config.params, sources=sourceset,
                                                     max_new_tokens=self.max_new_tokens, model=self.model,
                                                     request=self.request)
        return Prepared(prepared, sourceset)
