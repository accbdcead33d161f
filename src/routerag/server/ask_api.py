"""``POST /v1/ask`` (the run's ``Trace``) and ``POST /v1/ask/stream`` (the same run as server-sent
events: ``start``; ``retrieval``/``model`` as they return and ``step`` as each step joins the
trace; ``trace``, ``done``; ``error`` then ``done`` when the run raised). A client that
disconnects stops the run at its next model call or retrieval."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from routerag.corpus.schema import Question
from routerag.edge.admission import OVER_BOUND
from routerag.edge.asks import Ask, StrategyConfig
from routerag.server.admitted import AdmittedAsk, AdmittedStream
from routerag.server.deps import admit_ask, get_service, require_key
from routerag.server.errors import ERRORS
from routerag.server.live import Finished, KeepAlive, StreamItem, Watch
from routerag.server.service import Service
from routerag.trace import Trace

log = logging.getLogger(__name__)

__all__ = ["AskRequest", "router"]

router = APIRouter()
ADMITTED = [Depends(require_key)]  # the key before the admission (each route's `admitted`): 401 before 429
STREAM_REPLY: dict[int | str, dict[str, Any]] = {200: {"content": {"text/event-stream": {}}, "description": "start, retrieval/model/step..., trace, done"}}


class AskRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, description="the question to answer")
    strategy: str = Field("vanilla", description="a registered strategy (GET /v1/strategies)")
    params: dict[str, Any] = Field(default_factory=dict, description="the strategy's parameters")
    sources: list[str] = Field(default_factory=list, max_length=16, description="uploaded custom sources to mount")
    qid: str | None = Field(None, description="an id carried into the trace")


async def ask_of(body: AskRequest, service: Service = Depends(get_service)) -> Ask:
    """The request's question checked and its configuration prepared (off the event loop)."""
    service.answerer.check_question(body.question)
    prepared = await service.prepare(StrategyConfig(strategy=body.strategy, params=body.params, sources=body.sources))
    question = Question(qid=body.qid, question=body.question, answers=[]) if body.qid else body.question
    return Ask(prepared, question)


def _sse(event: str, data: BaseModel | dict[str, Any]) -> str:
    payload = data.model_dump_json() if isinstance(data, BaseModel) else json.dumps(data)
    return f"event: {event}\ndata: {payload}\n\n"


async def _events(ask: Ask, items: AsyncIterator[StreamItem]) -> AsyncIterator[str]:
    strategy, sources = ask.prepared.strategy, ask.prepared.sources
    question = ask.question if isinstance(ask.question, str) else ask.question.question
    yield _sse("start", {"question": question, "strategy": strategy.name,
                         "params": strategy.params.model_dump(mode="json"), "sources": sources.names()})
    try:
        async for item in items:
            if isinstance(item, Finished):
                yield _sse("trace", item.trace)
                yield _sse("done", {"answer": item.trace.answer, "error": item.trace.error, **item.trace.summary()})
            elif not isinstance(item, KeepAlive):
                yield _sse(item.kind, item)
    except Exception as exc:  # noqa: BLE001 — the stream still ends with its error and done events
        log.exception("the streamed run failed")
        error = f"internal error while answering ({type(exc).__name__})"
        yield _sse("error", {"error": error})
        yield _sse("done", {"answer": None, "error": error})


@router.post("/v1/ask", response_model=Trace, responses={**ERRORS, **OVER_BOUND}, dependencies=ADMITTED,
             summary="answer one question with a strategy; returns its trace")
async def ask(request: Request, admitted: AdmittedAsk = Depends(admit_ask), asked: Ask = Depends(ask_of),
              service: Service = Depends(get_service)) -> Trace | Response:
    trace = await service.run(asked, request.receive)
    admitted.replied()
    return trace if trace is not None else Response(status_code=499)  # the client left: nobody reads it


@router.post("/v1/ask/stream", response_model=None, dependencies=ADMITTED, responses={**STREAM_REPLY, **ERRORS, **OVER_BOUND},
             summary="the same as /v1/ask, streamed as server-sent events")
async def ask_stream(request: Request, admitted: AdmittedAsk = Depends(admit_ask), asked: Ask = Depends(ask_of),
                     service: Service = Depends(get_service)) -> AdmittedStream:
    items = service.stream(asked, request.receive, Watch(calls=True))
    return AdmittedStream(_events(asked, items), admitted)
