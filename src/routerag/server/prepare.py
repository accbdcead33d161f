"""Turning request bodies into runnable things: a strategy name plus JSON params become a
validated :class:`PreparedStrategy`; a list of custom source names becomes the ``SourceSet`` a
run sees. Nothing a request sends is executed: names are looked up in registries, params are
validated by the strategy's own pydantic ``Params`` model."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from routerag.registry import UnknownNameError
from routerag.server.retrieval_app import ApiError
from routerag.sources.sourceset import SourceSet
from routerag.strategies import STRATEGIES, Strategy, StrategyContext


class StrategyConfig(BaseModel):
    """One configuration of a run: a strategy, its params, the custom sources it mounts."""

    model_config = ConfigDict(extra="forbid")

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


def _named_sources(key: str, value: Any) -> list[str]:
    """The source names a param value gives: ``source``/``*_source`` (a name), ``sources``/
    ``*_sources`` (a list of names, or a mapping to names)."""
    if key == "source" or key.endswith("_source"):
        return [value] if isinstance(value, str) else []
    if key == "sources" or key.endswith("_sources"):
        items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
        return [v for v in items if isinstance(v, str)]
    return []


def prepare_strategy(name: str, params: dict[str, Any], *, sources: SourceSet | None = None,
                     max_new_tokens: int | None = None) -> PreparedStrategy:
    """Validates ``params`` strictly against the strategy's ``Params``: unknown names, wrong JSON
    types (``true`` for an integer, ``"3"`` for a number) -> 422. With ``sources``, every source a
    param names must be mounted; with ``max_new_tokens``, no token limit may exceed it."""
    try:
        cls = STRATEGIES.get(name)
    except UnknownNameError as exc:
        raise ApiError(422, str(exc)) from None
    except ImportError as exc:
        raise ApiError(422, f"strategy {name!r} is not available: {exc}") from None
    fields = cls.Params.model_fields
    unknown = [key for key in params if key not in fields]
    if unknown:
        raise ApiError(422, f"unknown params for strategy {name!r}: {', '.join(map(repr, unknown))}; "
                            f"it takes {', '.join(fields)}")
    try:
        validated = cls.Params.model_validate_json(json.dumps(params), strict=True)
    except ValidationError as exc:
        reasons = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}" for e in exc.errors())
        raise ApiError(422, f"invalid params for strategy {name!r}: {reasons}") from None
    except ValueError as exc:  # not representable as JSON (cannot come from a JSON body)
        raise ApiError(422, f"invalid params for strategy {name!r}: {exc}") from None
    if sources is not None:
        mounted = set(sources.names())
        for key, value in params.items():
            missing = [n for n in _named_sources(key, value) if n not in mounted]
            if missing:
                raise ApiError(422, f"params.{key}: unknown source {missing[0]!r}; mounted: {', '.join(sorted(mounted))}")
    if max_new_tokens is not None:
        for key, value in validated.model_dump().items():
            if key.startswith("max_") and "tokens" in key and isinstance(value, int) and value > max_new_tokens:
                raise ApiError(422, f"params.{key}: {value} is above this service's limit of {max_new_tokens} tokens")
    return PreparedStrategy(name, cls, validated)
