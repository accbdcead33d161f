"""The front door: where a request — a strategy name, its parameters, model settings — becomes a
ready strategy, with routerag's defaults applied in one place. ``routerag eval`` (eval/setup.py),
``routerag ask``/``demo`` (cli/ask_cmds.py) and the service (server/prepare.py) all call
:func:`resolve_strategy`; none of them looks a strategy up or applies a default itself.

The defaults, and who gets them:

* **The shipped policy** (``shipped_policy=True``): the ``routerag`` strategy on the bundled 0.5B
  through llama.cpp, with no adapter named, runs with the SFT policy adapter shipped in
  ``data/policies`` — the model it was trained for. ``routerag ask``, ``routerag demo`` and the
  service ask for it (``--untrained`` opts out); ``routerag eval`` does not: an evaluation runs
  exactly what its configuration names, so that the untrained baseline stays measurable and every
  stored run's fingerprint still matches (``docs/results/runs/*-routerag`` are that baseline; the
  ``sft-*`` runs name the adapter in their configuration).
* **Parameters**: validated by the strategy's own ``Params`` model. A JSON body (the service) is
  validated strictly — unknown names, ``true`` for an integer, ``"3"`` for a number are refused —;
  a YAML configuration or ``--set`` overrides (eval, ask) the way pydantic converts them.
* **Index components** for an index built on the fly by ``ask``/``demo``:
  :data:`INTERACTIVE_COMPONENTS` (``eval`` keeps ``EvalConfig.components``, part of its fingerprint).
* **Concurrency**: one model instance per model configuration, each with its backend's
  concurrency (``ModelConfig.resolved``); a long-running service keeps them in a
  :class:`~routerag.llm.pool.ModelPool`.

Errors derive from :class:`~routerag.errors.RouteragError`: an unknown name lists the valid ones
(``UnknownNameError``), bad parameters say which and why (:class:`StrategyParamsError`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from routerag.errors import RouteragError
from routerag.llm.config import ModelConfig, with_default_policy
from routerag.strategies import STRATEGIES, Strategy, StrategyContext
from routerag.strategies.base import strategy_retrieves, strategy_revision

INTERACTIVE_COMPONENTS: tuple[str, ...] = ("dense", "bm25", "graph")
"""The index components ``routerag ask``/``demo`` build over a dataset's corpus (every mode the
routerag strategy can route to)."""


class StrategyParamsError(RouteragError, ValueError):
    """A strategy's parameters are unknown or invalid; the message names each one and why."""


@dataclass(frozen=True)
class ResolvedStrategy:
    """A strategy class with validated params and the model configuration that runs it."""

    name: str
    cls: type[Strategy]
    params: BaseModel
    model: ModelConfig | None
    """The model configuration, defaults applied; None when the caller gave none (it brings its own model)."""

    @property
    def retrieves(self) -> bool:
        return strategy_retrieves(self.cls)

    @property
    def revision(self) -> int:
        return strategy_revision(self.cls)

    def build(self, context: StrategyContext) -> Strategy:
        return self.cls(context, self.params)


def resolve_strategy(strategy: str, params: Mapping[str, Any] | None = None, model: ModelConfig | None = None, *,
                     shipped_policy: bool, json_params: bool = False) -> ResolvedStrategy:
    """``strategy`` + ``params`` + ``model`` -> a :class:`ResolvedStrategy`, defaults applied.

    ``shipped_policy``: apply the shipped policy adapter where it fits (see the module's notes);
    every caller says whether it wants it. ``json_params``: the params come from a JSON body and
    are validated strictly. Raises ``UnknownNameError`` (a ``RouteragError``) for an unknown
    strategy, :class:`StrategyParamsError` for bad params or a strategy whose optional dependency
    is missing."""
    try:
        cls = STRATEGIES.get(strategy)
    except ImportError as exc:
        raise StrategyParamsError(f"strategy {strategy!r} is not available: {exc}") from None
    validated = _validate(strategy, cls, dict(params or {}), json_params)
    if model is not None and shipped_policy:
        model = with_default_policy(model, strategy)
    return ResolvedStrategy(strategy, cls, validated, model)


def _validate(name: str, cls: type[Strategy], params: dict[str, Any], json_params: bool) -> BaseModel:
    if not json_params:
        try:
            return cls.Params.model_validate(params)
        except ValidationError as exc:
            raise StrategyParamsError(f"invalid params for strategy {name!r}: {_reasons(exc)}") from None
    fields = cls.Params.model_fields
    unknown = [key for key in params if key not in fields]
    if unknown:
        raise StrategyParamsError(f"unknown params for strategy {name!r}: {', '.join(map(repr, unknown))}; "
                                  f"it takes {', '.join(fields)}")
    try:
        return cls.Params.model_validate_json(json.dumps(params), strict=True)
    except ValidationError as exc:
        raise StrategyParamsError(f"invalid params for strategy {name!r}: {_reasons(exc)}") from None
    except ValueError as exc:  # not representable as JSON (cannot come from a JSON body)
        raise StrategyParamsError(f"invalid params for strategy {name!r}: {exc}") from None


def _reasons(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}" for e in exc.errors())
