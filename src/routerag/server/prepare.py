"""Turning request bodies into runnable things: a strategy name plus JSON params become a
validated :class:`PreparedStrategy`; a list of custom source names becomes the ``SourceSet`` a
run sees. Nothing a request sends is executed: names are looked up in registries, params are
validated by the strategy's own pydantic ``Params`` model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from routerag.registry import UnknownNameError
from routerag.server.retrieval_app import ApiError
from routerag.strategies import STRATEGIES, Strategy, StrategyContext


class StrategyConfig(BaseModel):
    """One configuration of a run: a strategy, its params, the custom sources it mounts."""

    strategy: str = Field("vanilla", description="a registered strategy (GET /v1/strategies)")
    params: dict[str, Any] = Field(default_factory=dict, description="the strategy's parameters")
    sources: list[str] = Field(default_factory=list, max_length=16,
                               description="uploaded custom sources to mount next to the service's own")
    label: str | None = Field(None, max_length=80, description="its name in comparison tables")


@dataclass
class PreparedStrategy:
    """A strategy class with validated params; ``build`` makes one bound to a context."""

    name: str
    cls: type[Strategy]
    params: BaseModel

    def build(self, context: StrategyContext) -> Strategy:
        return self.cls(context, self.params)


def prepare_strategy(name: str, params: dict[str, Any]) -> PreparedStrategy:
    try:
        cls = STRATEGIES.get(name)
    except UnknownNameError as exc:
        raise ApiError(422, str(exc)) from None
    except ImportError as exc:
        raise ApiError(422, f"strategy {name!r} is not available: {exc}") from None
    try:
        validated = cls.Params.model_validate(params)
    except ValidationError as exc:
        reasons = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}" for e in exc.errors())
        raise ApiError(422, f"invalid params for strategy {name!r}: {reasons}") from None
    return PreparedStrategy(name, cls, validated)
