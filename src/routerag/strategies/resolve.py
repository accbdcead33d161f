"""A request — a strategy name, its parameters, model settings — becomes a
:class:`ResolvedStrategy`, with routerag's defaults applied here and nowhere else (the defaults
and who gets them: ``routerag.api``'s module notes). The front door's jobs (``api.asking``,
``api.evaluating``), the run assembler and the service build strategies only from a
:class:`ResolvedStrategy`.

A strategy that runs other strategies (``adaptive``) gets them through the context's resolver
(``StrategyContext.resolve``); :meth:`ResolvedStrategy.build` injects this module's, so those
strategies are validated and defaulted here too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from routerag.corpus.schema import Question
from routerag.errors import RouteragError
from routerag.llm.base import ChatModel
from routerag.llm.config import ModelConfig
from routerag.provenance import FromRequest
from routerag.runtime.base import AnswerSink, Strategy, StrategyContext, strategy_retrieves, strategy_revision
from routerag.sources.sourceset import SourceSet
from routerag.strategies import STRATEGIES
from routerag.strategies.shipped import with_default_policy
from routerag.trace import StepObserver, Trace


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
    shipped_policy: bool = False
    json_params: bool = False
    request: FromRequest | None = None
    """Where the params came from: a request (names and paths limited to what it may name), or None:
    the operator's configuration."""

    @property
    def retrieves(self) -> bool:
        return strategy_retrieves(self.cls)

    @property
    def revision(self) -> int:
        return strategy_revision(self.cls)

    def named_sources(self) -> list[str]:
        """Every source name its params give (``source``, ``*_sources`` ...), in order, once each."""
        names = [name for key, value in self.params.model_dump().items() for name in param_sources(key, value)]
        return list(dict.fromkeys(names))

    def token_limits(self) -> dict[str, int]:
        """Its token limits: the ``max_*tokens*`` integer params (``max_tokens``,
        ``max_tokens_per_turn``, ...) and their values."""
        return {key: value for key, value in self.params.model_dump().items()
                if key.startswith("max_") and "tokens" in key and isinstance(value, int) and not isinstance(value, bool)}

    @property
    def adapter(self) -> str | None:
        """The policy adapter its model configuration applies (``name@sha256:prefix``), if any."""
        from routerag.llm.factory import adapter_label

        return adapter_label(self.model)

    def build(self, context: StrategyContext) -> Strategy:
        """The strategy over ``context``; strategies it runs (``adaptive``'s choices) are resolved
        through the front door with the same defaults and strictness, on the same model."""
        if context.resolve is None:
            context = replace(context, resolve=self._resolve)
        return self.cls(context, self.params)

    def _resolve(self, name: str, params: Mapping[str, Any] | None, context: StrategyContext, *,
                 adapter: Path | None = None) -> Strategy:
        model = self.model
        if adapter is not None:
            if model is None:
                raise StrategyParamsError(f"strategy {name!r} with the adapter {adapter}: the caller gave no model "
                                          "configuration to apply it to")
            from routerag.llm.factory import DeferredModel

            model = model.model_copy(update={"lora_path": Path(adapter)})
            try:
                model.resolved()  # e.g. an adapter on a backend that takes none: refused now, not at the first question
            except ValueError as exc:
                raise StrategyParamsError(f"strategy {name!r} with the adapter {adapter}: {exc}") from None
            # built on the first question that runs this strategy (an unchosen one never loads)
            context = replace(context, model=DeferredModel(model))
        return resolve_strategy(name, params, model, shipped_policy=self.shipped_policy,
                                json_params=self.json_params, request=self.request).build(context)


def param_sources(key: str, value: Any) -> list[str]:
    """The source names a param value gives: ``source``/``*_source`` (a name), ``sources``/
    ``*_sources`` (a list of names, or a mapping to names)."""
    if key == "source" or key.endswith("_source"):
        return [value] if isinstance(value, str) else []
    if key == "sources" or key.endswith("_sources"):
        items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
        return [v for v in items if isinstance(v, str)]
    return []


def resolve_strategy(strategy: str, params: Mapping[str, Any] | None = None, model: ModelConfig | None = None, *,
                     shipped_policy: bool, json_params: bool = False,
                     request: FromRequest | None = None) -> ResolvedStrategy:
    """``strategy`` + ``params`` + ``model`` -> a :class:`ResolvedStrategy`, defaults applied.

    ``shipped_policy``: apply the shipped policy adapter where it fits (see the module's notes);
    every caller says whether it wants it. ``json_params``: the params come from a JSON body and
    are validated strictly. ``request``: the name and params come from a request, and name
    registered parts, the plugins it allows and paths inside its data folder only (so do the
    params of the strategies this one runs); nothing else they name is imported or read.
    Raises ``UnknownNameError`` (a ``RouteragError``) for an unknown or refused strategy,
    :class:`StrategyParamsError` for bad params or a strategy whose optional dependency is missing."""
    try:
        cls = STRATEGIES.get(strategy, request)
    except ImportError as exc:
        raise StrategyParamsError(f"strategy {strategy!r} is not available: {exc}") from None
    validated = _validate(strategy, cls, dict(params or {}), json_params, request)
    if model is not None and shipped_policy:
        model = with_default_policy(model, strategy)
    return ResolvedStrategy(strategy, cls, validated, model, shipped_policy, json_params, request)


def strategy_factory(resolved: ResolvedStrategy, model: ChatModel, sources: SourceSet, *,
                     on_step: StepObserver | None = None, on_answer: AnswerSink | None = None) -> Callable[[], Strategy]:
    """A fresh strategy per call over ``model`` and ``sources`` (the service's runs: one per answer)."""

    adapter = resolved.adapter

    def make() -> Strategy:
        return resolved.build(StrategyContext(model=model, sources=sources, on_step=on_step, adapter=adapter,
                                              on_answer=on_answer))

    return make


def answer(resolved: ResolvedStrategy, model: ChatModel, sources: SourceSet, question: str | Question, *,
           on_step: StepObserver | None = None, on_answer: AnswerSink | None = None) -> Trace:
    """One question with a resolved strategy over the caller's model and sources (the service's
    ``/v1/ask``, ``/v1/ask/stream`` and ``/v1/chat/completions``); ``on_step`` and ``on_answer``
    as on :class:`~routerag.runtime.base.StrategyContext`."""
    return strategy_factory(resolved, model, sources, on_step=on_step, on_answer=on_answer)().run(question)


def _validate(name: str, cls: type[Strategy], params: dict[str, Any], json_params: bool,
              request: FromRequest | None) -> BaseModel:
    context = request.context() if request is not None else None
    if not json_params:
        try:
            return cls.Params.model_validate(params, context=context)
        except ValidationError as exc:
            raise StrategyParamsError(f"invalid params for strategy {name!r}: {_reasons(exc)}") from None
    fields = cls.Params.model_fields
    unknown = [key for key in params if key not in fields]
    if unknown:
        raise StrategyParamsError(f"unknown params for strategy {name!r}: {', '.join(map(repr, unknown))}; "
                                  f"it takes {', '.join(fields)}")
    try:
        return cls.Params.model_validate_json(json.dumps(params), strict=True, context=context)
    except ValidationError as exc:
        raise StrategyParamsError(f"invalid params for strategy {name!r}: {_reasons(exc)}") from None
    except ValueError as exc:  # not representable as JSON (cannot come from a JSON body)
        raise StrategyParamsError(f"invalid params for strategy {name!r}: {exc}") from None


def _reasons(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}" for e in exc.errors())
