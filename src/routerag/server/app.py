"""The ask service: run a routing strategy over an injected model and ``SourceSet``.

* ``POST /v1/ask``: ``{question, strategy, params}`` returns the run's ``Trace``.
* ``POST /v1/ask/stream``: the same run as server-sent events. Events arrive in this order:
  ``start``, ``retrieval``/``model`` as they happen, ``trace`` (the full trace), ``done``.
* ``POST /v1/runs``: a background run over many questions. Poll it with
  ``GET /v1/runs/{id}``, read it with ``GET /v1/runs/{id}/traces``, and stop it with
  ``DELETE /v1/runs/{id}``.
* ``GET /v1/strategies``: the registered strategies and the JSON schema of their params.
* The retrieval API (``/retrieve``, ``/sources``, ...) is mounted under ``/retrieval``.

A strategy's ``params`` arrive as JSON and are validated into the strategy's own ``Params``
model before anything runs. A bad strategy name or bad params get 422 with the reason.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field, ValidationError

from routerag.corpus.schema import Question
from routerag.llm.base import ChatModel
from routerag.registry import UnknownNameError
from routerag.server.events import ObservedModel, ObservedSourceSet, ProgressEvent
from routerag.server.jobs import RunManager, RunQuestion, RunStatus, UnknownRunError
from routerag.server.retrieval_app import (
    ERRORS,
    ApiError,
    ErrorReply,
    BodyLimitMiddleware,
    api_key_dependency,
    create_retrieval_app,
    install_error_handlers,
)
from routerag.server.settings import ServiceSettings
from routerag.sources.sourceset import SourceSet
from routerag.strategies import STRATEGIES, Strategy, StrategyContext
from routerag.trace import Trace


class AskRequest(BaseModel):
    question: str = Field(min_length=1, description="the question to answer")
    strategy: str = Field("vanilla", description="a registered strategy (GET /v1/strategies)")
    params: dict[str, Any] = Field(default_factory=dict, description="the strategy's parameters")
    qid: str | None = Field(None, description="an id carried into the trace")


class RunRequest(BaseModel):
    questions: list[RunQuestion] = Field(min_length=1)
    strategy: str = "vanilla"
    params: dict[str, Any] = Field(default_factory=dict)


class StrategyInfo(BaseModel):
    name: str
    params_schema: dict[str, Any]


@dataclass
class PreparedStrategy:
    """A strategy class with validated params; ``build`` makes one bound to a context."""

    name: str
    cls: type[Strategy]
    params: BaseModel

    def build(self, context: StrategyContext) -> Strategy:
        return self.cls(context, self.params)


def prepare_strategy(name: str, params: dict[str, Any]) -> PreparedStrategy:
    try:
        cls = STRATEGIES.get(name)
    except UnknownNameError as exc:
        raise ApiError(422, str(exc)) from None
    except ImportError as exc:
        raise ApiError(422, f"strategy {name!r} is not available: {exc}") from None
    try:
        validated = cls.Params.model_validate(params)
    except ValidationError as exc:
        reasons = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}" for e in exc.errors())
        raise ApiError(422, f"invalid params for strategy {name!r}: {reasons}") from None
    return PreparedStrategy(name, cls, validated)


def _sse(event: str, data: BaseModel | dict[str, Any]) -> str:
    payload = data.model_dump_json() if isinstance(data, BaseModel) else json.dumps(data)
    return f"event: {event}\ndata: {payload}\n\n"


def create_app(model: ChatModel, sources: SourceSet, settings: ServiceSettings | None = None) -> FastAPI:
    settings = settings or ServiceSettings()
    runs = RunManager(workers=settings.run_workers, keep=settings.keep_runs)
    require_key = api_key_dependency(settings.api_key)
    limiter: list[anyio.CapacityLimiter] = []

    def ask_limiter() -> anyio.CapacityLimiter:
        if not limiter:  # created inside the running event loop
            limiter.append(anyio.CapacityLimiter(settings.ask_threads))
        return limiter[0]

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await anyio.to_thread.run_sync(runs.shutdown)

    app = FastAPI(title="routerag", version="1", lifespan=lifespan,
                  description="Ask questions through learned/adaptive routing strategies and watch their traces.")
    app.state.runs = runs
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)

    @app.exception_handler(UnknownRunError)
    async def _no_run(_: Request, exc: UnknownRunError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    def check_question(text: str, where: str = "question") -> None:
        if not text.strip():
            raise ApiError(422, f"{where} is empty")
        if len(text) > settings.max_question_chars:
            raise ApiError(422, f"{where} has {len(text)} characters; the limit is {settings.max_question_chars}")

    def prepare_ask(body: AskRequest) -> tuple[AskRequest, PreparedStrategy]:
        check_question(body.question)
        return body, prepare_strategy(body.strategy, body.params)

    def item_of(body: AskRequest) -> str | Question:
        return Question(qid=body.qid, question=body.question, answers=[]) if body.qid else body.question

    auth = [Depends(require_key)]

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

    @app.post("/v1/ask", response_model=Trace, responses=ERRORS, dependencies=auth,
              summary="answer one question with a strategy; returns its trace")
    async def ask(prepared: tuple[AskRequest, PreparedStrategy] = Depends(prepare_ask)) -> Trace:
        body, strategy = prepared
        runner = strategy.build(StrategyContext(model=model, sources=sources))
        return await anyio.to_thread.run_sync(runner.run, item_of(body), limiter=ask_limiter())

    @app.post("/v1/ask/stream", response_model=None, dependencies=auth,
              responses={200: {"content": {"text/event-stream": {}}, "description": "start, retrieval/model..., trace, done"},
                         **ERRORS},
              summary="the same as /v1/ask, streamed as server-sent events")
    async def ask_stream(prepared: tuple[AskRequest, PreparedStrategy] = Depends(prepare_ask)) -> StreamingResponse:
        body, strategy = prepared
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[ProgressEvent | None] = asyncio.Queue()

        def sink(event: ProgressEvent) -> None:  # called from the worker thread
            loop.call_soon_threadsafe(queue.put_nowait, event)

        runner = strategy.build(StrategyContext(model=ObservedModel(model, sink),
                                                sources=ObservedSourceSet(sources, sink)))

        async def events() -> AsyncIterator[str]:
            yield _sse("start", {"question": body.question, "strategy": strategy.name,
                                 "params": strategy.params.model_dump(mode="json")})
            task = asyncio.ensure_future(anyio.to_thread.run_sync(runner.run, item_of(body), limiter=ask_limiter()))
            task.add_done_callback(lambda _: queue.put_nowait(None))
            while (event := await queue.get()) is not None:
                yield _sse(event.kind, event)
            trace: Trace = task.result()
            yield _sse("trace", trace)
            yield _sse("done", {"answer": trace.answer, "error": trace.error, **trace.summary()})

        return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    @app.post("/v1/runs", response_model=RunStatus, status_code=202, responses=ERRORS, dependencies=auth,
              summary="start a background run over many questions")
    async def start_run(body: RunRequest) -> RunStatus:
        if len(body.questions) > settings.max_run_questions:
            raise ApiError(422, f"{len(body.questions)} questions; a run takes at most {settings.max_run_questions}")
        for i, q in enumerate(body.questions):
            check_question(q.question, f"question {i}")
        strategy = prepare_strategy(body.strategy, body.params)
        make: Callable[[], Strategy] = lambda: strategy.build(StrategyContext(model=model, sources=sources))  # noqa: E731
        return runs.submit(make, strategy.name, strategy.params.model_dump(mode="json"), body.questions)

    @app.get("/v1/runs", response_model=list[RunStatus], dependencies=auth)
    async def list_runs() -> list[RunStatus]:
        return runs.list()

    @app.get("/v1/runs/{run_id}", response_model=RunStatus, responses={404: {"model": ErrorReply, "description": "no such run"}}, dependencies=auth)
    async def run_status(run_id: str) -> RunStatus:
        return runs.status(run_id)

    @app.get("/v1/runs/{run_id}/traces", response_model=list[Trace], dependencies=auth)
    async def run_traces(run_id: str, offset: int = Query(0, ge=0), limit: int = Query(100, ge=1, le=1000)) -> list[Trace]:
        return runs.traces(run_id, offset, limit)

    @app.delete("/v1/runs/{run_id}", response_model=RunStatus, dependencies=auth, summary="cancel a run")
    async def cancel_run(run_id: str) -> RunStatus:
        return runs.cancel(run_id)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": model.name, "sources": sources.names()}

    app.mount("/retrieval", create_retrieval_app(sources, settings.retrieval_settings()))
    return app
