"""A strategy run in a worker thread, watched from the event loop while its client waits.

:func:`watched_run` awaits the run's trace, or gives up when the client disconnects first;
:func:`watched_stream` yields what the run reports as it happens (its steps; with
:class:`Watch`, its model calls and retrievals, its answer's pieces, a :class:`KeepAlive` in the
silences), then :class:`Finished` with its trace. Either way a client that leaves sets the run's
``cancelled`` flag, so the run stops at its next model call or retrieval
(:mod:`routerag.edge.cancel`) and frees its thread; a run still waiting for a thread of the
``limiter`` stops at its first call. The run itself is the ask path's
(:meth:`routerag.edge.asks.Answerer.answer`, reporting to :class:`~routerag.edge.asks.Observers`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from functools import partial
from typing import Literal

import anyio
from pydantic import BaseModel
from starlette.types import Receive

from routerag.edge.asks import Observers
from routerag.edge.cancel import unless_disconnected, wait_for_disconnect
from routerag.edge.events import AnswerPiece, ProgressEvent, StepEvent
from routerag.trace import Trace

__all__ = ["Finished", "KeepAlive", "Live", "StreamItem", "Watch", "Work", "watched_run", "watched_stream"]


class KeepAlive(BaseModel):
    """Nothing else was reported for ``Watch.keep_alive_s``."""

    kind: Literal["keep-alive"] = "keep-alive"


class Finished(BaseModel):
    """The run ended (its trace may record an error)."""

    kind: Literal["finished"] = "finished"
    trace: Trace


Live = ProgressEvent | AnswerPiece
StreamItem = Live | KeepAlive | Finished


@dataclass(frozen=True)
class Watch:
    """What a streamed run reports besides its steps."""

    calls: bool = False  # every model call and retrieval as it returns
    answer: bool = False  # the answer's pieces as its model call generates them
    keep_alive_s: float | None = None  # a KeepAlive after this many seconds without anything else


Work = Callable[[threading.Event, Observers], Trace]
"""The run: it stops at its next call once the event is set, and reports to the observers."""


async def watched_run(work: Work, receive: Receive, limiter: anyio.CapacityLimiter) -> Trace | None:
    """The run's trace, or None when the client left first (the run is then stopped)."""
    cancelled = threading.Event()
    job = anyio.to_thread.run_sync(partial(work, cancelled, Observers()), limiter=limiter)
    finished, trace = await unless_disconnected(receive, cancelled, job)
    return trace if finished else None


def _observers(watch: Watch, put: Callable[[Live], None]) -> Observers:
    return Observers(on_call=put if watch.calls else None,
                     on_step=lambda step: put(StepEvent(step=step.model_copy(deep=True))),  # as it was when appended
                     on_answer=(lambda text: put(AnswerPiece(text=text))) if watch.answer else None)


def _forget(task: asyncio.Future[Trace]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: nobody waits for an abandoned run


async def _next(queue: asyncio.Queue[Live | None], keep_alive_s: float | None) -> Live | KeepAlive | None:
    try:
        return await asyncio.wait_for(queue.get(), keep_alive_s)
    except TimeoutError:
        return KeepAlive()


async def watched_stream(work: Work, receive: Receive, limiter: anyio.CapacityLimiter,
                         watch: Watch = Watch()) -> AsyncIterator[StreamItem]:
    """What the run reports, as it happens, then :class:`Finished`; nothing more once the client
    has left. The run starts at the first item asked for; what it raises is raised here."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Live | None] = asyncio.Queue()
    cancelled = threading.Event()

    def put(item: Live) -> None:  # called from the worker thread
        loop.call_soon_threadsafe(queue.put_nowait, item)

    task = asyncio.ensure_future(anyio.to_thread.run_sync(partial(work, cancelled, _observers(watch, put)), limiter=limiter))
    task.add_done_callback(lambda _: loop.call_soon(queue.put_nowait, None))  # after the items it put
    watcher = asyncio.ensure_future(wait_for_disconnect(receive))

    def client_left(w: asyncio.Future[None]) -> None:
        if not w.cancelled():
            cancelled.set()  # the run stops at its next call
            queue.put_nowait(None)

    watcher.add_done_callback(client_left)
    try:
        while (item := await _next(queue, watch.keep_alive_s)) is not None:
            yield item
        if cancelled.is_set():
            return  # the client has gone
        yield Finished(trace=await task)
    finally:  # also when the client left mid-stream (the generator is closed)
        watcher.cancel()
        if not task.done():
            cancelled.set()  # the run stops at its next call and frees its thread
            task.add_done_callback(_forget)
