"""A streamed chat completion: the run's steps and its answer as server-sent
``chat.completion.chunk`` events while the run works.

The events, in order:

1. a chunk with the assistant ``role`` (and empty ``content``) as soon as the request is accepted;
2. while the run works, as it happens: a ``reasoning_content`` delta per step of the run (one
   short line ending in a newline, :func:`~routerag.server.step_lines.step_line`), and ``content``
   deltas of the answer once its model call generates it (``StrategyContext.on_answer``: the
   strategies whose answer is one call's text, on a backend that streams); ``: keep-alive``
   comments whenever nothing else was sent for a while. A step recorded after the answer's first
   content delta gets no line (it is in the trace);
3. when the run ends, a ``content`` delta with the part of the answer not sent yet (all of it for a
   strategy or a backend that does not stream the answer);
4. the finishing chunk: an empty delta, ``finish_reason: "stop"`` and the full trace under
   ``routerag``; it is the last chunk that has choices;
5. with ``stream_options.include_usage``, a chunk with ``usage`` and no choices (``usage`` is null
   on every chunk before it, as OpenAI sends it);
6. ``data: [DONE]``.

A run that fails sends ``data: {"error": {...}, "routerag": trace}`` instead of 3–5. A client that
leaves stops the run at its next model call or retrieval.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol

import anyio
from fastapi import Request
from pydantic import BaseModel

from routerag.edge.cancel import wait_for_disconnect
from routerag.runtime.base import AnswerSink
from routerag.server.chat_schema import ChatCompletionChunk, ChunkChoice, CompletionUsage, Delta
from routerag.server.events import StepEvent
from routerag.server.openai_errors import ErrorChunk, error_event, run_failure
from routerag.server.step_lines import step_line
from routerag.trace import StepObserver, Trace

log = logging.getLogger(__name__)

__all__ = ["AnswerPiece", "ChunkWriter", "ObservedRun", "stream_completion"]

DONE = "data: [DONE]\n\n"


class ObservedRun(Protocol):
    """The run of a completion, reporting its steps and its answer's pieces as they happen."""

    def __call__(self, *, on_step: StepObserver | None = None, on_answer: AnswerSink | None = None) -> Trace: ...


class AnswerPiece(BaseModel):
    kind: Literal["answer"] = "answer"
    text: str


Live = StepEvent | AnswerPiece


class ChunkWriter:
    """The ``data:`` events of one streamed completion (``meta``: its id, created and model)."""

    def __init__(self, meta: dict[str, Any], include_usage: bool) -> None:
        self.meta = meta
        self.include_usage = include_usage
        self.sent = ""  # the answer's text sent so far

    def chunk(self, **fields: Any) -> str:
        chunk = ChatCompletionChunk(**self.meta, **fields)
        exclude = {name for name in ("usage", "routerag") if getattr(chunk, name) is None}
        if self.include_usage:
            exclude.discard("usage")
        return f"data: {chunk.model_dump_json(exclude=exclude)}\n\n"

    def delta(self, **fields: Any) -> str:
        return self.chunk(choices=[ChunkChoice(delta=Delta(**fields))])

    def role(self) -> str:
        return self.delta(role="assistant", content="")

    def live(self, item: Live) -> str | None:
        if isinstance(item, AnswerPiece):
            self.sent += item.text
            return self.delta(content=item.text)
        if self.sent:
            return None  # the answer has begun: the step is in the trace only
        line = step_line(item.step)
        return self.delta(reasoning_content=line + "\n") if line is not None else None

    def finish(self, trace: Trace) -> list[str]:
        if trace.error is not None:
            return [f"data: {ErrorChunk(error=run_failure(trace)[1], routerag=trace).model_dump_json()}\n\n"]
        events = []
        answer = trace.answer or ""
        if answer.startswith(self.sent):
            if len(answer) > len(self.sent):
                events.append(self.delta(content=answer[len(self.sent):]))
        else:  # cannot happen when a strategy's settled answer holds its promise
            log.warning("the streamed answer %r is not a prefix of the run's answer %r", self.sent, answer)
        events.append(self.chunk(choices=[ChunkChoice(delta=Delta(), finish_reason="stop")], routerag=trace))
        if self.include_usage:
            events.append(self.chunk(choices=[], usage=CompletionUsage.of(trace)))
        return events


def _forget(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: nobody waits for an abandoned run


def _start(run: ObservedRun, limiter: anyio.CapacityLimiter, queue: asyncio.Queue[Live | None]) -> asyncio.Future[Trace]:
    """The run in a worker thread, its steps and answer pieces put on ``queue``, then None."""
    loop = asyncio.get_running_loop()

    def put(item: Live) -> None:  # called from the worker thread
        loop.call_soon_threadsafe(queue.put_nowait, item)

    def observed() -> Trace:
        return run(on_step=lambda step: put(StepEvent(step=step.model_copy(deep=True))),
                   on_answer=lambda text: put(AnswerPiece(text=text)))

    task = asyncio.ensure_future(anyio.to_thread.run_sync(observed, limiter=limiter))
    task.add_done_callback(lambda _: loop.call_soon(queue.put_nowait, None))  # after the items it put
    return task


async def _live(queue: asyncio.Queue[Live | None], writer: ChunkWriter, keep_alive_s: float) -> AsyncIterator[str]:
    """The events of the items on ``queue`` until None, keep-alive comments in the silences."""
    while True:
        try:
            item = await asyncio.wait_for(queue.get(), keep_alive_s)
        except TimeoutError:
            yield ": keep-alive\n\n"
            continue
        if item is None:
            return
        event = writer.live(item)
        if event is not None:
            yield event


async def stream_completion(request: Request, run: ObservedRun, cancelled: threading.Event,
                            limiter: anyio.CapacityLimiter, writer: ChunkWriter,
                            keep_alive_s: float) -> AsyncIterator[str]:
    """The events of a streamed completion (see the module notes)."""
    yield writer.role()
    queue: asyncio.Queue[Live | None] = asyncio.Queue()
    task = _start(run, limiter, queue)
    watcher = asyncio.ensure_future(wait_for_disconnect(request.receive))

    def client_left(w: asyncio.Future[None]) -> None:
        if not w.cancelled():
            cancelled.set()  # the run stops at its next call
            queue.put_nowait(None)

    watcher.add_done_callback(client_left)
    try:
        async for event in _live(queue, writer, keep_alive_s):
            yield event
        if cancelled.is_set():
            return  # the client has gone
        for event in writer.finish(await task):
            yield event
    except Exception as exc:  # noqa: BLE001 — the stream still ends with its error and [DONE]
        yield error_event(exc)  # bad params found while building a strategy it runs (adaptive's choices), or a bug
    finally:  # also when the client left mid-stream (the generator is closed)
        watcher.cancel()
        if not task.done():
            cancelled.set()  # the run stops at its next call and frees its thread
            task.add_done_callback(_forget)
    yield DONE
