"""A strategy as a request names it, prepared to run: a strategy name plus JSON params become a
validated :class:`PreparedStrategy` through :func:`~routerag.strategies.resolve.resolve_strategy`
(the front door's defaults), checked against what the caller serves (the sources it mounts, its
token limit). Nothing a request sends is executed: names are looked up in registries (a request
names registered parts and the plugins the operator allowed; any other plugin name is refused
before it is imported), paths must lie inside the caller's data folder, params are validated by
the strategy's own pydantic ``Params`` model (:mod:`routerag.provenance`).

A refusal raises :class:`StrategyRequestError`, whose message says what and why; the service
gives it an HTTP status at its edge, the MCP tools hand it back as the tool's error."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from routerag.errors import RouteragError
from routerag.llm.config import ModelConfig
from routerag.provenance import FromRequest
from routerag.registry import UnknownNameError
from routerag.sources.sourceset import SourceSet
from routerag.strategies.resolve import ResolvedStrategy, StrategyParamsError, resolve_strategy

__all__ = ["PreparedStrategy", "StrategyRequestError", "named_sources", "prepare_strategy", "token_limits"]

PreparedStrategy = ResolvedStrategy  # the name the service's modules use


class StrategyRequestError(RouteragError, ValueError):
    """A request's strategy is refused before it runs: an unknown strategy, invalid params, a
    source a param names that is not mounted, or a token limit above the caller's."""


def _named_sources(key: str, value: Any) -> list[str]:
    """The source names a param value gives: ``source``/``*_source`` (a name), ``sources``/
    ``*_sources`` (a list of names, or a mapping to names)."""
    if key == "source" or key.endswith("_source"):
        return [value] if isinstance(value, str) else []
    if key == "sources" or key.endswith("_sources"):
        items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
        return [v for v in items if isinstance(v, str)]
    return []


def named_sources(params: BaseModel) -> list[str]:
    """Every source name a strategy's params give (``source``, ``*_sources`` ...), in order, once each."""
    names = [name for key, value in params.model_dump().items() for name in _named_sources(key, value)]
    return list(dict.fromkeys(names))


def _check_mounted(prepared: PreparedStrategy, params: dict[str, Any], sources: SourceSet) -> None:
    mounted = set(sources.names())
    for key, value in params.items():
        missing = [n for n in _named_sources(key, value) if n not in mounted]
        if missing:
            raise StrategyRequestError(f"params.{key}: unknown source {missing[0]!r}; mounted: {', '.join(sorted(mounted))}")
    check = getattr(prepared.params, "check_mounted", None)  # params whose sources sit in a mapping
    if callable(check):
        try:
            check(mounted)
        except ValueError as exc:
            raise StrategyRequestError(f"params: {exc}") from None


def prepare_strategy(name: str, params: dict[str, Any], *, sources: SourceSet | None = None,
                     max_new_tokens: int | None = None, model: ModelConfig | None = None,
                     request: FromRequest = FromRequest()) -> PreparedStrategy:
    """The front door's :func:`~routerag.api.resolve_strategy` with a request's checks: the
    params are validated strictly as JSON (unknown names, ``true`` for an integer, ``"3"`` for a
    number) and as a request's (``request``: the plugin names the operator allowed and the data
    folder; by default none of either: registered names only); with ``sources``, every source a
    param names must be mounted (and a Params model's own ``check_mounted(mounted)``, such as
    r1-router's ``retrievers``, must pass); with ``max_new_tokens``, no token limit may exceed it.
    With ``model`` (the caller's model configuration), the shipped policy applies as it does for
    ``routerag ask``. Every refusal is a :class:`StrategyRequestError`."""
    try:
        prepared = resolve_strategy(name, params, model, shipped_policy=True, json_params=True, request=request)
    except (UnknownNameError, StrategyParamsError) as exc:
        raise StrategyRequestError(str(exc)) from None
    if sources is not None:
        _check_mounted(prepared, params, sources)
    if max_new_tokens is not None:
        for key, value in token_limits(prepared.params).items():
            if value > max_new_tokens:
                raise StrategyRequestError(f"params.{key}: {value} is above this service's limit of {max_new_tokens} tokens")
    return prepared


def token_limits(params: BaseModel) -> dict[str, int]:
    """A strategy's token limits: its ``max_*tokens*`` integer params (``max_tokens``,
    ``max_tokens_per_turn``, ...) and their values."""
    return {key: value for key, value in params.model_dump().items()
            if key.startswith("max_") and "tokens" in key and isinstance(value, int) and not isinstance(value, bool)}
