"""``resolve_strategy`` at the front door: the model configuration with the model environment
applied (:mod:`routerag.api.environment`), then :func:`routerag.strategies.resolve.resolve_strategy`,
which the run assembler and the service call below the front door with configurations that
already have it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routerag.llm.config import ModelConfig
from routerag.provenance import FromRequest
from routerag.strategies.resolve import ResolvedStrategy
from routerag.strategies.resolve import resolve_strategy as resolve_below


def resolve_strategy(strategy: str, params: Mapping[str, Any] | None = None, model: ModelConfig | None = None, *,
                     shipped_policy: bool, json_params: bool = False,
                     request: FromRequest | None = None) -> ResolvedStrategy:
    """``strategy`` + ``params`` + ``model`` -> a :class:`ResolvedStrategy`, defaults applied: the
    model environment to ``model`` first, then everything
    :func:`routerag.strategies.resolve.resolve_strategy` applies (its arguments, its errors)."""
    from routerag.api.environment import model_environment

    if model is not None:
        model = model.with_environment(model_environment())
    return resolve_below(strategy, params, model, shipped_policy=shipped_policy, json_params=json_params,
                         request=request)
