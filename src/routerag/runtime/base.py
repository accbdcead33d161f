"""The strategy protocol: ``run(question) -> Trace``. Strategies get their model and sources
injected (a ``StrategyContext``); they never construct them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel

from routerag.corpus.schema import Question
from routerag.llm.base import ChatModel
from routerag.registry import Registry, classes_with
from routerag.sources.sourceset import SourceSet
from routerag.trace import StepObserver, Trace

AnswerSink = Callable[[str], None]
"""Receives the final answer's text, piece by piece, while the model writes it (:mod:`routerag.runtime.answer_stream`)."""


@dataclass
class StrategyContext:
    """What a strategy runs with. ``on_step``: called with each step as it is appended to the
    run's trace (``Trace.add``), so a caller can show steps as they happen (the service's stream).
    ``resolve``: how a strategy that runs other strategies (``adaptive``) gets them — a name and
    params -> a built strategy over a given context; the front door (``routerag.api``) injects its
    own, with its validation and defaults; without one, :func:`registry_resolver` is used.
    ``on_answer``: called with pieces of the final answer as its model call generates them, by the
    strategies whose answer is one call's text (:func:`~routerag.runtime.answer_stream.call_answer`);
    joined, the pieces are a prefix of the trace's answer."""

    model: ChatModel
    sources: SourceSet
    on_step: StepObserver | None = None
    resolve: StrategyResolver | None = None
    adapter: str | None = None  # the policy adapter the model applies (name@sha256 prefix), recorded in each trace's params
    on_answer: AnswerSink | None = None


@runtime_checkable
class Strategy(Protocol):
    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]  # the strategy's typed parameters
    # Optional ``revision: ClassVar[int]``, read through ``strategy_revision`` (a Protocol member
    # cannot carry a default): bumped when a change of the code changes answers (a recovery, a
    # prompt); part of the evaluation fingerprint when non-zero, so that a run is never resumed
    # with other strategy code. Optional ``retrieves: ClassVar[bool]`` (read through
    # ``strategy_retrieves``; default True): False for a strategy that never searches (direct,
    # rule), whose evaluation then builds no index.

    def __init__(self, context: StrategyContext, params: BaseModel | None = None) -> None: ...

    def run(self, question: str | Question) -> Trace: ...


class StrategyResolver(Protocol):
    """``(strategy name, params or None, context) -> a built strategy``; with ``adapter`` (a
    llama.cpp LoRA adapter GGUF) the strategy runs on the run's model configuration with that
    adapter instead of the context's model — only a resolver that knows the model configuration
    (the front door's) can do that."""

    def __call__(self, name: str, params: Mapping[str, Any] | None, context: StrategyContext, *,
                 adapter: Path | None = None) -> Strategy: ...

STRATEGIES: Registry[type[Strategy]] = Registry("strategy", classes_with("Params", "run"))


def registry_resolver(name: str, params: Mapping[str, Any] | None, context: StrategyContext, *,
                      adapter: Path | None = None) -> Strategy:
    """The plain resolver: the registered class, its ``Params`` validated from ``params``. It has
    no model configuration, so it cannot give a strategy an ``adapter`` of its own."""
    if adapter is not None:
        raise ValueError(f"strategy {name!r} with its own adapter ({adapter}) needs the front door's resolver "
                         "(routerag.api: it builds the run's model configuration with the adapter)")
    cls = STRATEGIES.get(name)
    return cls(context, None if params is None else cls.Params.model_validate(dict(params)))


def strategy_revision(cls: type) -> int:
    """The strategy class's code revision: its ``revision`` class attribute, 0 when it has none."""
    revision = getattr(cls, "revision", 0)
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
        raise TypeError(f"strategy {getattr(cls, 'name', cls.__name__)!r}: revision must be an int >= 0, got {revision!r}")
    return revision


def strategy_retrieves(cls: type) -> bool:
    """Whether the strategy class searches its sources (``retrieves``, True when it has none)."""
    retrieves = getattr(cls, "retrieves", True)
    if not isinstance(retrieves, bool):
        raise TypeError(f"strategy {getattr(cls, 'name', cls.__name__)!r}: retrieves must be a bool, got {retrieves!r}")
    return retrieves
