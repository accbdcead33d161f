"""Live progress events of a strategy run, for the service's streamed routes (``/v1/ask/stream``,
a streamed chat completion), reported by the ask path (:meth:`routerag.edge.asks.Answerer.answer`).

Strategies return their ``Trace`` at the end. To show progress as it happens, the run's context
gets a step observer (``StrategyContext.on_step``: every :class:`~routerag.trace.Step` as it is
appended, a :class:`StepEvent`), an observed model and an observed ``SourceSet`` (every model call
and every retrieval as it returns, before the step that uses it is complete), all reporting to one
sink; the strategy code stays unchanged. The answer's pieces, as its model call generates them
(``StrategyContext.on_answer``), are :class:`AnswerPiece` events.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel

from routerag.llm.base import ChatModel, ChatResponse, GenerationParams, Message
from routerag.sources.base import RetrievalRequest, RetrievalResponse
from routerag.sources.sourceset import SourceSet
from routerag.trace import Step


class TopHit(BaseModel):
    doc_id: str
    title: str
    score: float
    source: str


class RetrievalEvent(BaseModel):
    kind: Literal["retrieval"] = "retrieval"
    queries: list[str]
    sources: list[str]
    k: int
    hits: int
    top: list[TopHit]  # the best hit of each source for the first query
    wall_ms: float


class ModelEvent(BaseModel):
    kind: Literal["model"] = "model"
    model: str
    continue_final: bool
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    finish_reason: str
    text: str  # what the model generated (capped at 2,000 characters)


class StepEvent(BaseModel):
    kind: Literal["step"] = "step"
    step: Step  # the step as it was appended to the trace


class AnswerPiece(BaseModel):
    kind: Literal["answer"] = "answer"
    text: str


ProgressEvent = RetrievalEvent | ModelEvent | StepEvent
Sink = Callable[[ProgressEvent], None]


class ObservedModel:
    """A ``ChatModel`` that reports each call to ``sink`` after it returns."""

    def __init__(self, inner: ChatModel, sink: Sink) -> None:
        self.inner = inner
        self.name = inner.name
        self.sink = sink

    def chat(
        self,
        messages: list[Message],
        params: GenerationParams | None = None,
        *,
        continue_final: bool = False,
    ) -> ChatResponse:
        t0 = time.perf_counter()
        response = self.inner.chat(messages, params, continue_final=continue_final)
        self.sink(ModelEvent(
            model=self.name,
            continue_final=continue_final,
            prompt_tokens=response.usage.prompt_tokens,
            completion_tokens=response.usage.completion_tokens,
            latency_ms=response.latency_ms or (time.perf_counter() - t0) * 1000.0,
            finish_reason=response.finish_reason,
            text=response.text[:2000],
        ))
        return response


class ObservedSourceSet(SourceSet):
    """The same mounted sources; every ``retrieve`` (and thus ``search``/``search_one``) is
    reported to ``sink``."""

    def __init__(self, inner: SourceSet, sink: Sink) -> None:
        super().__init__(inner.get(name) for name in inner.names())
        self.inner = inner
        self.sink = sink

    def retrieve(self, request: RetrievalRequest) -> RetrievalResponse:
        response = self.inner.retrieve(request)  # the inner set may wrap retrieval too
        top = [TopHit(doc_id=r[0].hits[0].doc_id, title=r[0].hits[0].title, score=r[0].hits[0].score, source=name)
               for name, r in response.results.items() if r and r[0].hits]
        self.sink(RetrievalEvent(
            queries=request.queries,
            sources=request.sources,
            k=request.k,
            hits=sum(len(q.hits) for results in response.results.values() for q in results),
            top=top,
            wall_ms=response.wall_ms,
        ))
        return response
