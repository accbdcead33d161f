"""The ask path both front doors share, without HTTP: the service (``/v1/ask``, ``/v1/ask/stream``,
``/v1/chat/completions``, ``/v1/runs``: :class:`routerag.server.service.Service`) and the MCP
server's ``ask`` tool (:mod:`routerag.integrations.mcp_tools`) prepare and run a question here.

* :class:`Preparation`: a request's :class:`StrategyConfig` made runnable, a :class:`Prepared` —
  assembled as every run is (:func:`routerag.run.assemble.assemble`): its strategy resolved with
  the caller's limits, then the uploads it names mounted (the service's store; the MCP server
  mounts none) and the sources its params name checked; the model is the caller's. It reads files
  (the uploads' indexes, an adapter unpacked): call it in a worker thread.
* :class:`Answerer`: the question checked (:meth:`~Answerer.check_question`), the model a prepared
  strategy runs on (:meth:`~Answerer.model_for`, built on first use) and the run of an :class:`Ask`
  (:meth:`~Answerer.answer`), in the caller's worker thread: it stops at its next model call or
  search once ``cancelled`` is set (:mod:`routerag.edge.cancel`) and reports its steps, calls and
  answer's pieces to :class:`Observers` as they happen (:mod:`routerag.edge.events`).

Refusals are domain errors (:class:`~routerag.edge.refusals.RequestRefused`,
:class:`~routerag.run.assemble.StrategyRequestError`, the uploads' own); how a caller waits
for its client (an HTTP disconnect, an MCP cancellation) and answers a refusal is its own."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from routerag.corpus.schema import Question
from routerag.edge.cancel import CancellableModel, CancellableSourceSet
from routerag.edge.events import ObservedModel, ObservedSourceSet, Sink
from routerag.edge.refusals import RequestRefused
from routerag.llm.base import ChatModel
from routerag.llm.config import ModelConfig
from routerag.llm.conversation import Conversation, ConversationModel
from routerag.llm.pool import ModelPool
from routerag.provenance import FromRequest
from routerag.run import assemble as run_assemble
from routerag.run.assemble import AssembledRun, Mounted, RequestLimits, StrategyChoice, Uploads
from routerag.runtime.base import AnswerSink
from routerag.sources.sourceset import SourceSet
from routerag.strategies.resolve import ResolvedStrategy, answer
from routerag.trace import StepObserver, Trace

__all__ = ["Answerer", "Ask", "Observers", "Prepared", "PreparedStrategy", "Preparation", "StrategyConfig", "Uploads"]


class StrategyConfig(BaseModel):
    """One configuration of a run: a strategy, its params, the custom sources it mounts."""

    model_config = ConfigDict(extra="forbid")

    strategy: str = Field("vanilla", description="a registered strategy (GET /v1/strategies)")
    params: dict[str, Any] = Field(default_factory=dict, description="the strategy's parameters")
    sources: list[str] = Field(default_factory=list, max_length=16,
                               description="uploaded custom sources to mount next to the service's own")
    label: str | None = Field(None, max_length=80, description="its name in comparison tables")


Prepared = AssembledRun
"""A configuration made runnable: the strategy prepared and the sources its run sees (assembled
without a model: the caller's answers it)."""

PreparedStrategy = ResolvedStrategy


@dataclass(frozen=True)
class Preparation:
    """How a front door prepares a configuration: ``base`` (its own sources) plus the uploads from
    ``uploads`` (None: it mounts none); its token limit, model configuration and what a request may
    name (``request``)."""

    base: SourceSet
    max_new_tokens: int
    model: ModelConfig | None
    request: FromRequest
    uploads: Uploads | None = None

    def __call__(self, config: StrategyConfig) -> Prepared:
        choice = StrategyChoice(config.strategy, config.params, self.model, shipped_policy=True,
                                limits=RequestLimits(self.request, self.max_new_tokens))
        return run_assemble.assemble(choice, Mounted(self.base, config.sources, self.uploads), "caller")


@dataclass(frozen=True)
class Ask:
    """One question for a prepared configuration; ``conversation``: what every model call of the
    run sees besides the strategy's own prompts (a chat's instructions and earlier turns)."""

    prepared: Prepared
    question: str | Question
    conversation: Conversation | None = None


@dataclass(frozen=True)
class Observers:
    """Where the run in the worker thread reports (None: not observed)."""

    on_call: Sink | None = None
    on_step: StepObserver | None = None
    on_answer: AnswerSink | None = None


class Answerer:
    """Questions answered over ``preparation``: on ``model``, or, with ``preparation.model`` (what
    ``model`` was built from), on the model the front door resolves for each strategy — the shipped
    policy for ``routerag`` on the bundled 0.5B, built on first use — as ``routerag ask`` does; a
    question has at most ``max_question_chars`` characters. Thread-safe."""

    def __init__(self, preparation: Preparation, model: ChatModel, max_question_chars: int) -> None:
        self.preparation = preparation
        self.model = model
        self.pool = ModelPool(preparation.model, model) if preparation.model is not None else None
        self.max_question_chars = max_question_chars

    def check_question(self, text: str, where: str = "question") -> None:
        """:class:`RequestRefused` for an empty question or one over the limit (``where`` names it)."""
        if not text.strip():
            raise RequestRefused(f"{where} is empty")
        if len(text) > self.max_question_chars:
            raise RequestRefused(f"{where} has {len(text)} characters; the limit is {self.max_question_chars}")

    def model_for(self, strategy: PreparedStrategy) -> ChatModel:
        """The model that answers ``strategy`` (built on first use: call it in a worker thread)."""
        return self.pool.get(strategy.model) if self.pool is not None else self.model

    def answer(self, ask: Ask, cancelled: threading.Event, seen: Observers = Observers()) -> Trace:
        """The run of ``ask``, in its worker thread: the model looked up here (building it never
        blocks an event loop); it stops at its next call once ``cancelled`` is set
        (:class:`~routerag.edge.cancel.RunCancelled`) and reports to ``seen``."""
        model: ChatModel = CancellableModel(self.model_for(ask.prepared.strategy), cancelled)
        sources: SourceSet = CancellableSourceSet(ask.prepared.sources, cancelled)
        if ask.conversation is not None:
            model = ConversationModel(model, ask.conversation)
        if seen.on_call is not None:
            model, sources = ObservedModel(model, seen.on_call), ObservedSourceSet(sources, seen.on_call)
        return answer(ask.prepared.strategy, model, sources, ask.question, on_step=seen.on_step, on_answer=seen.on_answer)
