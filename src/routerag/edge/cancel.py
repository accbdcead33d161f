"""Stop the work of a client that has gone.

A strategy runs in a worker thread and cannot be interrupted in the middle of a model call. So a
run is given a model and a ``SourceSet`` that check a flag before every call: once the client has
disconnected the flag is set, the next model call or retrieval raises :class:`RunCancelled`, and
the run ends within one call. A run still waiting for a worker thread stops at its first call.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import Any, TypeVar

from starlette.types import Receive

from routerag.errors import RouteragError
from routerag.llm.base import ChatModel, ChatResponse, GenerationParams, Message
from routerag.sources.base import RetrievalRequest, RetrievalResponse
from routerag.sources.sourceset import SourceSet

T = TypeVar("T")


class RunCancelled(RouteragError):
    """The client that asked for this run has gone."""


class CancellableModel:
    """A ``ChatModel`` that refuses new calls once ``cancelled`` is set."""

    def __init__(self, inner: ChatModel, cancelled: threading.Event) -> None:
        self.inner = inner
        self.name = inner.name
        self.cancelled = cancelled

    def chat(self, messages: list[Message], params: GenerationParams | None = None, *,
             continue_final: bool = False) -> ChatResponse:
        if self.cancelled.is_set():
            raise RunCancelled("the client disconnected; the run was stopped")
        return self.inner.chat(messages, params, continue_final=continue_final)


class CancellableSourceSet(SourceSet):
    """The same mounted sources; ``retrieve`` (and thus ``search``) refuses once ``cancelled`` is set."""

    def __init__(self, inner: SourceSet, cancelled: threading.Event) -> None:
        super().__init__(inner.get(name) for name in inner.names())
        self.inner = inner
        self.cancelled = cancelled

    def retrieve(self, request: RetrievalRequest) -> RetrievalResponse:
        if self.cancelled.is_set():
            raise RunCancelled("the client disconnected; the run was stopped")
        return self.inner.retrieve(request)


async def wait_for_disconnect(receive: Receive) -> None:
    """Returns when the client has gone (call it once the request body has been read)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def unless_disconnected(receive: Receive, cancelled: threading.Event, work: Awaitable[T]) -> tuple[bool, T | None]:
    """Awaits ``work`` while watching the connection: ``(True, result)``, or ``(False, None)``
    when the client left first. Then ``cancelled`` is set and ``work`` is left to end by itself:
    its run stops at its next call, and a run still waiting for a worker thread stops at its
    first, so the thread limit keeps counting every thread really in use."""
    job = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(wait_for_disconnect(receive))
    try:
        await asyncio.wait({job, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not job.done():
            cancelled.set()
            job.add_done_callback(_forget)
    if job.done():
        return True, job.result()
    return False, None


def _forget(job: asyncio.Future[Any]) -> None:
    if not job.cancelled():
        job.exception()  # retrieved: nobody waits for an abandoned run
