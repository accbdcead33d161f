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
leaves stops the run at its next model call or retrieval (the service's stream,
:meth:`~routerag.server.service.Service.stream`, runs it; this module writes its chunks).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from routerag.edge.events import AnswerPiece, StepEvent
from routerag.server.chat_schema import ChatCompletionChunk, ChunkChoice, CompletionUsage, Delta
from routerag.server.live import Finished, KeepAlive, Live, StreamItem
from routerag.server.openai_errors import ErrorChunk, error_event, run_failure
from routerag.server.step_lines import step_line
from routerag.trace import Trace

log = logging.getLogger(__name__)

__all__ = ["ChunkWriter", "stream_completion"]

DONE = "data: [DONE]\n\n"


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
        if self.sent or not isinstance(item, StepEvent):
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


async def stream_completion(items: AsyncIterator[StreamItem], writer: ChunkWriter) -> AsyncIterator[str]:
    """The events of a streamed completion (see the module notes) from what its run reports."""
    yield writer.role()
    ended = False
    try:
        async for item in items:
            if isinstance(item, KeepAlive):
                yield ": keep-alive\n\n"
            elif isinstance(item, Finished):
                ended = True
                for event in writer.finish(item.trace):
                    yield event
            elif (live := writer.live(item)) is not None:
                yield live
        if not ended:
            return  # the client has gone
    except Exception as exc:  # noqa: BLE001 — the stream still ends with its error and [DONE]
        yield error_event(exc)  # bad params found while building a strategy it runs (adaptive's choices), or a bug
    yield DONE
