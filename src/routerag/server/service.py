"""The ask service below its routes: one :class:`Service` holds the model pool, the sources (the
service's own and the uploads), the run queue and store (:mod:`routerag.server.jobs`), the
admission of asks and run answers, the thread limit of asks, the warm-up and the settings.

Every route reaches it through a FastAPI dependency (:mod:`routerag.server.deps`) and runs a
question the same way:

* :meth:`Service.prepare` makes a request's configuration runnable (its uploads mounted, its
  strategy resolved, which may unpack an adapter) in a worker thread, never on the event loop;
* :meth:`Service.run` answers an :class:`Ask` in a worker thread of the ask limit and gives its
  trace, or None when the client left first;
* :meth:`Service.stream` yields what the run reports as it happens (:mod:`routerag.server.live`).

Its model is looked up in the worker thread, so building one (the shipped policy of a strategy,
on first use) never blocks the event loop. Refusals are domain errors (:class:`RequestRefused`
and the kinds of :mod:`routerag.server.domain_errors`); the routes' modules turn them into HTTP.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
from pydantic import BaseModel, Field
from starlette.types import Receive

from routerag.corpus.schema import Question
from routerag.edge.admission import Admission, AdmissionState
from routerag.edge.cancel import CancellableModel, CancellableSourceSet
from routerag.llm.base import ChatModel
from routerag.llm.config import ModelConfig
from routerag.llm.conversation import Conversation, ConversationModel
from routerag.llm.factory import adapter_label
from routerag.llm.pool import ModelPool
from routerag.paths import cache_dir
from routerag.server.chat_models import ChatModels
from routerag.server.events import ObservedModel, ObservedSourceSet
from routerag.server.jobs import RunManager
from routerag.server.live import Observers, StreamItem, Watch, watched_run, watched_stream
from routerag.server.prepare import Preparation, Prepared, PreparedStrategy, StrategyConfig
from routerag.server.refusals import RequestRefused
from routerag.server.settings import AdmissionSettings, ServiceSettings
from routerag.server.uploads import SourceStore
from routerag.server.warm_plan import strategy_plan
from routerag.server.warmup import WarmUp, WarmUpState
from routerag.sources.sourceset import SourceSet
from routerag.strategies import STRATEGIES
from routerag.strategies.prepare import prepare_strategy
from routerag.strategies.resolve import answer
from routerag.trace import Trace

__all__ = ["Ask", "Readiness", "Service"]


@dataclass(frozen=True)
class Ask:
    """One question for a prepared configuration; ``conversation``: what every model call of the
    run sees besides the strategy's own prompts (a chat's instructions and earlier turns)."""

    prepared: Prepared
    question: str | Question
    conversation: Conversation | None = None


class Readiness(BaseModel):
    ready: bool
    reasons: list[str] = Field(default_factory=list, description="why not ready (empty when ready)")
    model: str
    sources: list[str]
    admission: list[AdmissionState]
    warm_up: WarmUpState = Field(description="the warm-up of the default strategy (off, warming, done, skipped, failed)")


def _strategy_adapter(name: str, model_config: ModelConfig) -> str | None:
    """The adapter a strategy's answers come from by default (the shipped policy, where it applies)."""
    try:
        return prepare_strategy(name, {}, model=model_config).adapter
    except (ValueError, OSError):  # a strategy that needs params to be resolved (StrategyRequestError)
        return None


def _admissions(bounds: AdmissionSettings) -> tuple[Admission, Admission]:
    return (Admission("asks", bounds.max_asks, bounds.max_asks_per_key, bounds.retry_after_s),
            Admission("run_answers", bounds.max_run_answers, bounds.max_run_answers_per_key, bounds.retry_after_s))


class Service:
    """The service over ``model`` and ``sources``. With ``model_config`` (what ``model`` was built
    from), a request runs on the model the front door resolves for its strategy — the shipped
    policy for ``routerag`` on the bundled 0.5B, built on first use — as ``routerag ask`` does."""

    def __init__(self, model: ChatModel, sources: SourceSet, settings: ServiceSettings | None = None, *,
                 model_config: ModelConfig | None = None) -> None:
        self.settings = settings = settings or ServiceSettings()
        self.model, self.sources, self.model_config = model, sources, model_config
        self.pool = ModelPool(model_config, model) if model_config is not None else None
        self.base_adapter = adapter_label(model_config)
        self.strategy_adapters = {} if model_config is None else {
            name: label for name in STRATEGIES.names()
            if (label := _strategy_adapter(name, model_config)) not in (None, self.base_adapter)}
        data_dir = settings.data_dir or cache_dir("service")
        self.uploads = SourceStore(data_dir, settings.uploads, reserved=set(sources.names()))
        self.runs = RunManager(workers=settings.run_workers, keep=settings.keep_runs, store_dir=data_dir / "runs",
                               min_free_bytes=settings.run_store_min_free_mb * 2**20)
        self.asks, self.run_answers = _admissions(settings.admission)
        request_values = settings.security.from_request(data_dir)  # what a request may name: never code, no outside path
        self.preparation = Preparation(self.uploads, sources, settings.max_new_tokens, model_config, request_values)
        self.chat_models = ChatModels(model_config, self.preparation)
        plan = strategy_plan(settings.warm_up_strategy, self.preparation, self.model_for) if settings.warm_up else None
        self.warm_up = WarmUp(settings.warm_up_strategy, plan)
        self.started = self.stopping = False
        self._threads: anyio.CapacityLimiter | None = None

    # ------------------------------------------------------------------ one question
    def model_for(self, strategy: PreparedStrategy) -> ChatModel:
        """The model that answers ``strategy`` (built on first use: call it in a worker thread)."""
        return self.pool.get(strategy.model) if self.pool is not None else self.model

    def check_question(self, text: str, where: str = "question") -> None:
        if not text.strip():
            raise RequestRefused(f"{where} is empty")
        if len(text) > self.settings.max_question_chars:
            raise RequestRefused(f"{where} has {len(text)} characters; the limit is {self.settings.max_question_chars}")

    async def prepare(self, config: StrategyConfig) -> Prepared:
        """``config`` made runnable, in a worker thread of the default pool (never behind the asks'
        limit). A refusal: :class:`StrategyRequestError` or :class:`UploadRejected`."""
        return await anyio.to_thread.run_sync(self.preparation, config)

    def threads(self) -> anyio.CapacityLimiter:
        """The worker threads of asks, streamed or not (``ask_threads`` at once)."""
        if self._threads is None:  # created inside the running event loop
            self._threads = anyio.CapacityLimiter(self.settings.ask_threads)
        return self._threads

    async def run(self, ask: Ask, receive: Receive) -> Trace | None:
        """The trace of ``ask``; None when the client left first (the run stops at its next call)."""
        return await watched_run(lambda cancelled, _: self._answer(ask, cancelled), receive, self.threads())

    def stream(self, ask: Ask, receive: Receive, watch: Watch = Watch()) -> AsyncIterator[StreamItem]:
        """What the run of ``ask`` reports as it happens (its steps and what ``watch`` asks for), then its trace."""
        return watched_stream(lambda cancelled, seen: self._answer(ask, cancelled, seen), receive, self.threads(), watch)

    def _answer(self, ask: Ask, cancelled: threading.Event, seen: Observers = Observers()) -> Trace:
        """The run, in its worker thread: the model looked up here, so building it never blocks the event loop."""
        model: ChatModel = CancellableModel(self.model_for(ask.prepared.strategy), cancelled)
        sources: SourceSet = CancellableSourceSet(ask.prepared.sources, cancelled)
        if ask.conversation is not None:
            model = ConversationModel(model, ask.conversation)
        if seen.on_call is not None:
            model, sources = ObservedModel(model, seen.on_call), ObservedSourceSet(sources, seen.on_call)
        return answer(ask.prepared.strategy, model, sources, ask.question, on_step=seen.on_step, on_answer=seen.on_answer)

    # ------------------------------------------------------------------ its life
    async def start(self) -> None:
        self.started = True
        self.warm_up.start()  # a daemon thread: never joined, a stop does not wait for a model still loading

    async def stop(self) -> None:
        self.stopping = True
        await anyio.to_thread.run_sync(self.runs.shutdown)
        await anyio.to_thread.run_sync(self.uploads.shutdown)

    def close(self) -> None:
        """Stop the workers of a service that was never started (its OpenAPI document built, say)."""
        self.runs.shutdown()
        self.uploads.shutdown()

    def readiness(self) -> Readiness:
        """Ready for asks: started, warmed up, not stopping, and the asks bound not reached."""
        states = [self.asks.state(), self.run_answers.state()]
        reasons = []
        if not self.started:
            reasons.append("starting")
        if self.stopping:
            reasons.append("stopping")
        warming = self.warm_up.state()
        if (reason := warming.blocks_readiness()) is not None:
            reasons.append(reason)
        if states[0].saturated:
            reasons.append(f"asks: {states[0].in_use} of {states[0].limit} queued or running")
        return Readiness(ready=not reasons, reasons=reasons, model=self.model.name, sources=self.sources.names(),
                         admission=states, warm_up=warming)
