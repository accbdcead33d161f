"""How the MCP server runs an ``ask``: admitted, on its own worker threads, and stopped when its
client no longer waits for it.

* Admission: the same :class:`~routerag.edge.admission.Admission` as the service's ``/v1/ask``
  (:func:`~routerag.edge.admission.ask_admission`), with the same settings (``admission.max_asks``, ``admission.max_asks_per_key`` by API key over
  HTTP). An ask beyond a bound is refused at once (:class:`~routerag.edge.admission.OverBound`,
  the tool's error result saying which bound), never queued.
* Threads: asks run on a limiter of their own (``ask_threads``), so ``search``, ``route`` and
  ``list_sources`` keep the SDK's worker threads however many asks are waiting.
* Cancellation: when the call's scope is cancelled (the client sent ``notifications/cancelled``,
  or its session ended) a flag is set and the run stops at its next model call or search
  (:mod:`routerag.edge.cancel`). The ticket is given back only once the run's thread has
  ended, so the bound counts every run really under way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

import anyio
from pydantic import SecretStr
from starlette.datastructures import Headers

from routerag.edge.admission import ask_admission, client_identity
from routerag.edge.settings import AdmissionSettings

T = TypeVar("T")

Work = Callable[[threading.Event], T]


class _Outcome(Generic[T]):
    """What the worker thread gave: a value or an exception (set once it has ended)."""

    def __init__(self) -> None:
        self.done = False
        self.value: T | None = None
        self.error: BaseException | None = None


async def run_until_cancelled(work: Work[T], limiter: anyio.CapacityLimiter) -> T:
    """``work(cancelled)`` in a worker thread; a cancellation of the caller sets ``cancelled``,
    then waits for the thread to end (at its next model call) before it propagates."""
    cancelled = threading.Event()
    outcome: _Outcome[T] = _Outcome()

    async def run() -> None:
        try:
            outcome.value = await anyio.to_thread.run_sync(work, cancelled, limiter=limiter)
        except Exception as exc:  # noqa: BLE001 — handed to the caller below, outside the task group
            outcome.error = exc
        finally:
            outcome.done = True
            group.cancel_scope.cancel()  # the watcher is done too

    async def watch() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            if not outcome.done:
                cancelled.set()  # the caller was cancelled: the run stops at its next call

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        group.start_soon(watch)
    if outcome.error is not None:
        raise outcome.error
    return outcome.value  # type: ignore[return-value]  # done without an error: the work's value


class AskGate:
    """The admission and the worker threads of one server's asks."""

    def __init__(self, bounds: AdmissionSettings, threads: int, api_key: SecretStr | None = None) -> None:
        self.admission = ask_admission(bounds)
        self.threads = threads
        self.api_key = api_key
        self._limiter: anyio.CapacityLimiter | None = None

    def limiter(self) -> anyio.CapacityLimiter:
        if self._limiter is None:  # created on first use, inside the running event loop
            self._limiter = anyio.CapacityLimiter(self.threads)
        return self._limiter

    def identity(self, headers: Mapping[str, str] | None) -> str | None:
        """The client's identity for the per-key bound: a hash of the API key it presented (HTTP with a key)."""
        if headers is None:
            return None
        return client_identity(Headers(headers=dict(headers)), self.api_key)

    async def run(self, work: Work[T], headers: Mapping[str, str] | None = None) -> T:
        """Admit one ask (:class:`~routerag.edge.admission.OverBound` beyond a bound), run it, give it back."""
        ticket = self.admission.admit(self.identity(headers))
        try:
            return await run_until_cancelled(work, self.limiter())
        finally:
            ticket.release()
