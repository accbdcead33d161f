"""The ask service below its routes: one :class:`Service` holds the ask path (an
:class:`~routerag.edge.asks.Answerer`: the preparation, the model pool, the question limit), the
sources (the service's own and the uploads), the run queue and store
(:mod:`routerag.server.jobs`), the admission of asks and run answers, the thread limit of asks,
the warm-up and the settings.

Every route reaches it through a FastAPI dependency (:mod:`routerag.server.deps`) and runs a
question the same way, the way the MCP server's ``ask`` tool does (:mod:`routerag.edge.asks`):

* :meth:`Service.prepare` makes a request's configuration runnable, assembled as every run is
  (:mod:`routerag.run.assemble`: its strategy resolved, which may unpack an adapter, its uploads
  mounted; for the chat endpoint, the strategy its model name picks) in a worker thread, never on
  the event loop;
* :meth:`Service.run` answers an :class:`~routerag.edge.asks.Ask` in a worker thread of the ask
  limit and gives its trace, or None when the client left first;
* :meth:`Service.stream` yields what the run reports as it happens (:mod:`routerag.server.live`).

Its model is looked up in the worker thread, so building one (the shipped policy of a strategy,
on first use) never blocks the event loop. Refusals are domain errors
(:class:`~routerag.edge.refusals.RequestRefused` and the kinds of
:mod:`routerag.server.domain_errors`); the routes' modules turn them into HTTP.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial

import anyio
from pydantic import BaseModel, Field
from starlette.types import Receive

from routerag.edge.admission import Admission, AdmissionState, ask_admission
from routerag.edge.asks import Answerer, Ask, Preparation, Prepared, StrategyConfig
from routerag.llm.base import ChatModel
from routerag.llm.config import ModelConfig
from routerag.llm.factory import adapter_label
from routerag.llm.llama_bindings import for_service
from routerag.paths import cache_dir
from routerag.run.assemble import StrategyChoice, prepare_strategy
from routerag.server.chat_models import ChatModels
from routerag.server.jobs import RunManager
from routerag.server.live import StreamItem, Watch, watched_run, watched_stream
from routerag.server.report_store import ReportStore
from routerag.server.settings import AdmissionSettings, ServiceSettings
from routerag.server.uploads import SourceStore
from routerag.server.warm_plan import strategy_plan
from routerag.server.warmup import WarmUp, WarmUpState
from routerag.sources.sourceset import SourceSet
from routerag.strategies import STRATEGIES
from routerag.trace import Trace

__all__ = ["Readiness", "Service"]


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
        return prepare_strategy(StrategyChoice(name, model=model_config)).adapter
    except (ValueError, OSError):  # a strategy that needs params to be resolved (StrategyRequestError)
        return None


def _admissions(bounds: AdmissionSettings) -> tuple[Admission, Admission]:
    return (ask_admission(bounds),
            Admission("run_answers", bounds.max_run_answers, bounds.max_run_answers_per_key, bounds.retry_after_s))


class Service:
    """The service over ``model`` and ``sources``. With ``model_config`` (what ``model`` was built
    from), a request runs on the model the front door resolves for its strategy — the shipped
    policy for ``routerag`` on the bundled 0.5B, built on first use — as ``routerag ask`` does."""

    def __init__(self, model: ChatModel, sources: SourceSet, settings: ServiceSettings | None = None, *,
                 model_config: ModelConfig | None = None) -> None:
        self.settings = settings = settings or ServiceSettings()
        if model_config is not None and settings.model_builds == "child-process":
            model_config = model_config.model_copy(update={"binding": for_service(model_config.binding)})
        self.model, self.sources, self.model_config = model, sources, model_config
        self.base_adapter = adapter_label(model_config)
        self.strategy_adapters = {} if model_config is None else {
            name: label for name in STRATEGIES.names()
            if (label := _strategy_adapter(name, model_config)) not in (None, self.base_adapter)}
        data_dir = settings.data_dir or cache_dir("service")
        self.uploads = SourceStore(data_dir, settings.uploads, reserved=set(sources.names()))
        self.runs = RunManager(workers=settings.run_workers, keep=settings.keep_runs, store_dir=data_dir / "runs",
                               min_free_bytes=settings.run_store_min_free_mb * 2**20)
        self.reports = ReportStore(data_dir / "reports")  # written by the operator's `routerag routing-report`
        self.asks, self.run_answers = _admissions(settings.admission)
        request_values = settings.security.from_request(data_dir)  # what a request may name: never code, no outside path
        preparation = Preparation(sources, settings.max_new_tokens, model_config, request_values, uploads=self.uploads)
        self.answerer = Answerer(preparation, model, settings.max_question_chars)
        self.chat_models = ChatModels(model_config, preparation)
        plan = strategy_plan(settings.warm_up_strategy, preparation, self.answerer.model_for) if settings.warm_up else None
        self.warm_up = WarmUp(settings.warm_up_strategy, plan)
        self.started = self.stopping = False
        self._threads: anyio.CapacityLimiter | None = None

    # ------------------------------------------------------------------ one question
    async def prepare(self, config: StrategyConfig, *, model: str | None = None, token_cap: int | None = None) -> Prepared:
        """``config`` made runnable, in a worker thread of the default pool (never behind the asks'
        limit). With ``model`` (a name of ``/v1/models``) the strategy is the one that name picks,
        every token limit of its params above ``token_cap`` lowered to it (:meth:`ChatModels.prepare`).
        A refusal: :class:`StrategyRequestError`, :class:`UploadRejected` or :class:`UnknownModelError`."""
        return await anyio.to_thread.run_sync(self._prepare_now, config, model, token_cap)

    def _prepare_now(self, config: StrategyConfig, model: str | None, token_cap: int | None) -> Prepared:
        if model is None:
            return self.answerer.preparation(config)
        return self.chat_models.prepare(model, config, token_cap)

    def threads(self) -> anyio.CapacityLimiter:
        """The worker threads of asks, streamed or not (``ask_threads`` at once)."""
        if self._threads is None:  # created inside the running event loop
            self._threads = anyio.CapacityLimiter(self.settings.ask_threads)
        return self._threads

    async def run(self, ask: Ask, receive: Receive) -> Trace | None:
        """The trace of ``ask``; None when the client left first (the run stops at its next call)."""
        return await watched_run(partial(self.answerer.answer, ask), receive, self.threads())

    def stream(self, ask: Ask, receive: Receive, watch: Watch = Watch()) -> AsyncIterator[StreamItem]:
        """What the run of ``ask`` reports as it happens (its steps and what ``watch`` asks for), then its trace."""
        return watched_stream(partial(self.answerer.answer, ask), receive, self.threads(), watch)

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
