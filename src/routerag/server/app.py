"""The ask service: run a routing strategy over an injected model and ``SourceSet``.

* ``POST /v1/ask``: ``{question, strategy, params, sources}`` returns the run's ``Trace``.
* ``POST /v1/ask/stream``: the same run as server-sent events. Events arrive in this order:
  ``start``; ``retrieval``/``model`` as they return and ``step`` as each step joins the trace (the
  strategy context's step observer); ``trace`` (the full trace), ``done``.
* ``POST /v1/runs``: a background run over many questions (given, or sampled evenly from a named
  dataset) with one configuration, or a comparison of several. ``GET /v1/runs/{id}`` polls,
  ``/traces`` pages, ``/report`` gives the comparison table and disagreements, ``DELETE`` cancels,
  ``POST /v1/runs/{id}/resume`` continues a run a crash interrupted (:mod:`routerag.server.jobs`).
* ``POST/GET/DELETE /v1/sources``: upload custom sources (see :mod:`routerag.server.sources_api`);
  a request mounts them by name with ``sources: [...]``.
* ``GET /v1/strategies``, ``GET /v1/datasets``, ``GET /v1/info``: what the UI needs to build forms.
* ``GET /health`` (the process answers) and ``GET /ready`` (started, the default strategy warmed
  up, and asks are admitted; 503 otherwise): no API key, answered on the event loop without waiting
  behind model work. The warm-up (:mod:`routerag.server.warmup`) runs in a background thread from
  startup; ``warm_up: false`` turns it off.
* Preparing a request (mounting its uploads, resolving its strategy, which may unpack an adapter)
  runs in a worker thread of the default pool on every route (asks, chat completions, runs and
  their resumption), never on the event loop and never behind the runs the ask limiter holds.
* Admission (:mod:`routerag.edge.admission`): asks queued or running and run answers not yet
  answered are bounded per service and per API key; over a bound, 429 with ``Retry-After``.
* The retrieval API (``/retrieve``, ``/sources``, ...) is mounted under ``/retrieval``; the web UI at ``/``.

A strategy's ``params`` arrive as JSON and are validated into the strategy's own ``Params``
model before anything runs, as a request's (:mod:`routerag.provenance`): they name registered
parts and the plugins in ``security.allowed_plugins`` only, and paths inside ``data_dir``. A bad
strategy name or bad params get 422 with the reason.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from routerag.corpus.schema import Question
from routerag.edge.admission import OVER_BOUND, Admission, AdmissionState, install_admission_handler
from routerag.edge.cancel import CancellableModel, CancellableSourceSet, unless_disconnected, wait_for_disconnect
from routerag.edge.guard import RequestGuard
from routerag.llm.base import ChatModel
from routerag.llm.config import ModelConfig
from routerag.llm.factory import adapter_label
from routerag.llm.pool import ModelPool
from routerag.paths import cache_dir
from routerag.server.domain_errors import install_domain_errors
from routerag.server.events import ObservedModel, ObservedSourceSet, ProgressEvent, StepEvent
from routerag.server.jobs import RunManager
from routerag.server.openai_api import build_chat_router
from routerag.server.openai_errors import refusal_body
from routerag.server.prepare import Preparation, PreparedStrategy, StrategyConfig
from routerag.server.retrieval_app import (
    ERRORS,
    ApiError,
    api_key_dependency,
    create_retrieval_app,
    install_error_handlers,
)
from routerag.server.runs_api import build_runs_router
from routerag.server.settings import ServiceSettings
from routerag.server.sources_api import build_sources_router, rejected_reply
from routerag.server.upload_parse import UploadRejected
from routerag.server.uploads import SourceStore
from routerag.server.warm_plan import strategy_plan
from routerag.server.warmup import WarmUp, WarmUpState
from routerag.sources.sourceset import SourceSet
from routerag.strategies import STRATEGIES
from routerag.strategies.prepare import prepare_strategy
from routerag.strategies.resolve import answer
from routerag.trace import Trace, trace_json_schema

log = logging.getLogger(__name__)

__all__ = ["AskRequest", "StrategyInfo", "create_app", "prepare_strategy"]


class AskRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, description="the question to answer")
    strategy: str = Field("vanilla", description="a registered strategy (GET /v1/strategies)")
    params: dict[str, Any] = Field(default_factory=dict, description="the strategy's parameters")
    sources: list[str] = Field(default_factory=list, max_length=16, description="uploaded custom sources to mount")
    qid: str | None = Field(None, description="an id carried into the trace")


class Readiness(BaseModel):
    ready: bool
    reasons: list[str] = Field(default_factory=list, description="why not ready (empty when ready)")
    model: str
    sources: list[str]
    admission: list[AdmissionState]
    warm_up: WarmUpState = Field(description="the warm-up of the default strategy (off, warming, done, skipped, failed)")


class StrategyInfo(BaseModel):
    name: str
    params_schema: dict[str, Any]


class ServiceInfo(BaseModel):
    model: str
    backend: str
    adapter: str | None = Field(None, description="the policy adapter the configured model applies (name@sha256:prefix)")
    strategy_adapters: dict[str, str] = Field(
        default_factory=dict, description="strategies answered with another adapter (the shipped policy) -> that adapter")
    sources: list[str]
    api_key_required: bool
    max_question_chars: int
    max_upload_bytes: int
    max_upload_rows: int


def _sse(event: str, data: BaseModel | dict[str, Any]) -> str:
    payload = data.model_dump_json() if isinstance(data, BaseModel) else json.dumps(data)
    return f"event: {event}\ndata: {payload}\n\n"


def _strategy_adapter(name: str, model_config: ModelConfig | None) -> str | None:
    """The adapter a strategy's answers come from by default (the shipped policy, where it applies)."""
    if model_config is None:
        return None
    try:
        return prepare_strategy(name, {}, model=model_config).adapter
    except (ValueError, OSError):  # a strategy that needs params to be resolved (StrategyRequestError)
        return None


# Over 80 lines: the app's routes are small closures over its state (model, sources, settings),
# registered in one place so the routes a service has can be read top to bottom; the runs routes
# have their own router (runs_api.py).
def create_app(model: ChatModel, sources: SourceSet, settings: ServiceSettings | None = None, *,
               model_config: ModelConfig | None = None) -> FastAPI:
    """The service over ``model``. With ``model_config`` (what ``model`` was built from), a request
    runs on the model the front door resolves for its strategy — the shipped policy for
    ``routerag`` on the bundled 0.5B, built on first use — as ``routerag ask`` does."""
    settings = settings or ServiceSettings()
    pool = ModelPool(model_config, model) if model_config is not None else None

    def model_for(strategy: PreparedStrategy) -> ChatModel:
        return pool.get(strategy.model) if pool is not None else model

    def backend_name() -> str:
        inner = model
        while hasattr(inner, "inner"):  # the concurrency limit and the cache wrap the backend's model
            inner = inner.inner
        return type(inner).__name__

    base_adapter = adapter_label(model_config)
    strategy_adapters = {name: label for name in STRATEGIES.names()
                         if (label := _strategy_adapter(name, model_config)) not in (None, base_adapter)}

    data_dir = settings.data_dir or cache_dir("service")
    request_values = settings.security.from_request(data_dir)  # what a request may name: never code, no outside path
    store = SourceStore(data_dir, settings.uploads, reserved=set(sources.names()))
    runs = RunManager(workers=settings.run_workers, keep=settings.keep_runs, store_dir=data_dir / "runs",
                      min_free_bytes=settings.run_store_min_free_mb * 2**20)
    require_key = api_key_dependency(settings.api_key)
    bounds = settings.admission
    asks = Admission("asks", bounds.max_asks, bounds.max_asks_per_key, bounds.retry_after_s)
    run_answers = Admission("run_answers", bounds.max_run_answers, bounds.max_run_answers_per_key, bounds.retry_after_s)
    lifecycle = {"started": False, "stopping": False}
    limiter: list[anyio.CapacityLimiter] = []

    def ask_limiter() -> anyio.CapacityLimiter:
        if not limiter:  # created inside the running event loop
            limiter.append(anyio.CapacityLimiter(settings.ask_threads))
        return limiter[0]

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        lifecycle["started"] = True
        warm_up.start()  # a daemon thread: never joined, a stop does not wait for a model still loading
        yield
        lifecycle["stopping"] = True
        await anyio.to_thread.run_sync(runs.shutdown)
        await anyio.to_thread.run_sync(store.shutdown)

    app = FastAPI(title="routerag", version="1", lifespan=lifespan,
                  description="Ask questions through learned/adaptive routing strategies and watch their traces.")
    app.state.runs = runs
    app.state.sources = store
    app.state.asks = asks  # the admission of asks: an ask route takes Depends(asks.dependency(settings.api_key))
    app.state.run_answers = run_answers
    install_error_handlers(app)
    install_admission_handler(app)
    upload_limit = max(settings.max_body_bytes, settings.uploads.max_bytes + 64 * 1024)  # multipart slack

    def body_limit(path: str) -> int:
        return upload_limit if path.rstrip("/") == "/v1/sources" else settings.max_body_bytes

    app.add_middleware(RequestGuard, bind_host=settings.host, api_key=settings.api_key, max_body_bytes=settings.max_body_bytes, security=settings.security,
                       body_limit=body_limit, refusal_body=refusal_body)

    install_domain_errors(app)  # routerag's refusals (a strategy request, a run) -> their HTTP status

    @app.exception_handler(UploadRejected)
    async def _rejected(_: Request, exc: UploadRejected) -> JSONResponse:
        return rejected_reply(exc)

    def check_question(text: str, where: str = "question") -> None:
        if not text.strip():
            raise ApiError(422, f"{where} is empty")
        if len(text) > settings.max_question_chars:
            raise ApiError(422, f"{where} has {len(text)} characters; the limit is {settings.max_question_chars}")

    prepare_config = Preparation(store, sources, settings.max_new_tokens, model_config, request_values)
    warm_up = WarmUp(settings.warm_up_strategy,
                     strategy_plan(settings.warm_up_strategy, prepare_config, model_for) if settings.warm_up else None)
    app.state.warm_up = warm_up

    def prepare_ask(body: AskRequest) -> tuple[AskRequest, PreparedStrategy, SourceSet]:  # a sync dependency: a worker thread
        check_question(body.question)
        strategy, sourceset = prepare_config(StrategyConfig(strategy=body.strategy, params=body.params, sources=body.sources))
        return body, strategy, sourceset

    def item_of(body: AskRequest) -> str | Question:
        return Question(qid=body.qid, question=body.question, answers=[]) if body.qid else body.question

    auth = [Depends(require_key)]
    admitted = [*auth, Depends(asks.dependency(settings.api_key))]  # the key first: 401 before 429

    @app.get("/v1/strategies", response_model=list[StrategyInfo], dependencies=auth)
    async def strategies() -> list[StrategyInfo]:
        infos = []
        for name in STRATEGIES.names():
            try:
                cls = STRATEGIES.get(name)
            except ImportError:
                continue  # an optional dependency is missing; the strategy is not offered
            infos.append(StrategyInfo(name=name, params_schema=cls.Params.model_json_schema()))
        return infos

    @app.get("/v1/schema/trace", summary="the JSON schema of a Trace: every field the UI may read (no API key needed)")
    async def trace_schema() -> dict[str, Any]:
        return trace_json_schema()

    @app.get("/v1/info", response_model=ServiceInfo, dependencies=auth, summary="the model and limits, for the UI")
    async def info() -> ServiceInfo:
        return ServiceInfo(model=model.name, backend=backend_name(), adapter=base_adapter, strategy_adapters=strategy_adapters,
                           sources=sources.names(),
                           api_key_required=settings.api_key is not None,
                           max_question_chars=settings.max_question_chars,
                           max_upload_bytes=settings.uploads.max_bytes, max_upload_rows=settings.uploads.max_rows)

    @app.post("/v1/ask", response_model=Trace, responses={**ERRORS, **OVER_BOUND}, dependencies=admitted,
              summary="answer one question with a strategy; returns its trace")
    async def ask(request: Request,
                  prepared: tuple[AskRequest, PreparedStrategy, SourceSet] = Depends(prepare_ask)) -> Trace | Response:
        body, strategy, sourceset = prepared
        cancelled = threading.Event()  # set when the client leaves: the run stops at its next call

        def run() -> Trace:  # the model is looked up in the worker thread: building it never blocks the event loop
            return answer(strategy, CancellableModel(model_for(strategy), cancelled),
                          CancellableSourceSet(sourceset, cancelled), item_of(body))
        finished, trace = await unless_disconnected(
            request.receive, cancelled, anyio.to_thread.run_sync(run, limiter=ask_limiter()))
        return trace if finished else Response(status_code=499)  # nobody reads it

    @app.post("/v1/ask/stream", response_model=None, dependencies=admitted,
              responses={200: {"content": {"text/event-stream": {}}, "description": "start, retrieval/model/step..., trace, done"},
                         **ERRORS, **OVER_BOUND},
              summary="the same as /v1/ask, streamed as server-sent events")
    async def ask_stream(
        request: Request,
        prepared: tuple[AskRequest, PreparedStrategy, SourceSet] = Depends(prepare_ask),
    ) -> StreamingResponse:
        body, strategy, sourceset = prepared
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[ProgressEvent | None] = asyncio.Queue()
        cancelled = threading.Event()  # set when the client leaves: the run stops at its next call

        def sink(event: ProgressEvent) -> None:  # called from the worker thread
            loop.call_soon_threadsafe(queue.put_nowait, event)

        def run() -> Trace:  # the model is looked up in the worker thread (see ask)
            return answer(strategy, ObservedModel(CancellableModel(model_for(strategy), cancelled), sink),
                          ObservedSourceSet(CancellableSourceSet(sourceset, cancelled), sink), item_of(body),
                          on_step=lambda step: sink(StepEvent(step=step.model_copy(deep=True))))  # as it was when appended

        async def events() -> AsyncIterator[str]:
            yield _sse("start", {"question": body.question, "strategy": strategy.name,
                                 "params": strategy.params.model_dump(mode="json"), "sources": sourceset.names()})
            task = asyncio.ensure_future(anyio.to_thread.run_sync(run, limiter=ask_limiter()))
            task.add_done_callback(lambda _: loop.call_soon(queue.put_nowait, None))
            watcher = asyncio.ensure_future(wait_for_disconnect(request.receive))

            def client_left(w: asyncio.Future[None]) -> None:
                if not w.cancelled():
                    cancelled.set()
                    queue.put_nowait(None)  # ends the event loop below

            watcher.add_done_callback(client_left)
            try:
                while (event := await queue.get()) is not None:
                    yield _sse(event.kind, event)
                if cancelled.is_set():
                    return  # the client has gone
                trace: Trace = await task
                yield _sse("trace", trace)
                yield _sse("done", {"answer": trace.answer, "error": trace.error, **trace.summary()})
            except Exception as exc:  # noqa: BLE001 — the stream still ends with its error and done events
                log.exception("the streamed run failed")
                error = f"internal error while answering ({type(exc).__name__})"
                yield _sse("error", {"error": error})
                yield _sse("done", {"answer": None, "error": error})
            finally:  # also when the client left mid-stream (the generator is closed)
                watcher.cancel()
                if not task.done():
                    cancelled.set()  # the run stops at its next call and frees its thread

        return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    app.include_router(build_runs_router(runs, model_for, prepare_config, check_question, settings, run_answers),
                       dependencies=auth)
    app.include_router(build_sources_router(sources, store), dependencies=auth)
    app.include_router(build_chat_router(model_for, prepare_config, check_question, ask_limiter, settings, model_config,
                                         admitted=[Depends(asks.dependency(settings.api_key))]), dependencies=auth)

    # /health and /ready are async and take no dependency: answered on the event loop, they never wait
    # for a worker thread (asks, sync dependencies) or a lock that model work holds
    @app.get("/health", summary="the process answers (no API key needed)")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": model.name, "sources": sources.names()}

    @app.get("/ready", response_model=Readiness, responses={503: {"model": Readiness, "description": "not ready"}},
             summary="ready for asks: started, warmed up, not stopping, and the asks bound not reached; else 503 "
                     "(no API key needed)")
    async def ready() -> JSONResponse:
        states = [asks.state(), run_answers.state()]
        reasons = []
        if not lifecycle["started"]:
            reasons.append("starting")
        if lifecycle["stopping"]:
            reasons.append("stopping")
        warming = warm_up.state()
        if (reason := warming.blocks_readiness()) is not None:
            reasons.append(reason)
        if states[0].saturated:
            reasons.append(f"asks: {states[0].in_use} of {states[0].limit} queued or running")
        reply = Readiness(ready=not reasons, reasons=reasons, model=model.name, sources=sources.names(), admission=states,
                          warm_up=warming)
        return JSONResponse(reply.model_dump(mode="json"), status_code=503 if reasons else 200)

    app.mount("/retrieval", create_retrieval_app(sources, settings.retrieval_settings()))
    if settings.ui:
        from routerag.server.ui import mount_ui

        mount_ui(app)
    return app
