"""Micro-batching of concurrent retrieval requests.

Requests that name the same sources and ``k`` and arrive while every worker thread is busy are
served by one ``SourceSet.retrieve`` call (up to ``max_batch`` queries), and each request gets
its own slice of the answer. Batches only form while requests wait for a thread, so an idle
server adds no delay. A dense source encodes a batch far faster than the same queries one by one
(one transformer forward pass instead of many), which is what bounds many concurrent
single-query clients on a small CPU; see docs/experiments/ for the measurement.

A batch whose call fails is retried request by request, so an error reaches only the request
that caused it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import anyio

from routerag.sources.base import RetrievalRequest, RetrievalResponse
from routerag.sources.sourceset import SourceSet

_Key = tuple[tuple[str, ...], int]


@dataclass
class _Group:
    key: _Key
    requests: list[RetrievalRequest] = field(default_factory=list)
    futures: list[asyncio.Future[RetrievalResponse]] = field(default_factory=list)
    size: int = 0  # queries in the group


class RequestBatcher:
    """``await batcher.run(request)``: retrieval in a worker thread (at most ``threads`` at once),
    merged with concurrent requests for the same sources and ``k`` when ``enabled``."""

    def __init__(self, sources: SourceSet, *, threads: int, max_batch: int, enabled: bool = True) -> None:
        self.sources = sources
        self.threads = threads
        self.max_batch = max_batch
        self.enabled = enabled
        self._limiter: anyio.CapacityLimiter | None = None
        self._open: dict[_Key, _Group] = {}  # groups still waiting for a thread (event-loop state only)
        self._tasks: set[asyncio.Task[None]] = set()
        self.batches = 0  # retrieval calls that served more than one request (for tests and benchmarks)
        self.merged_requests = 0  # requests served by those calls

    @property
    def limiter(self) -> anyio.CapacityLimiter:
        if self._limiter is None:  # created on first use, inside the running event loop
            self._limiter = anyio.CapacityLimiter(self.threads)
        return self._limiter

    async def run(self, request: RetrievalRequest) -> RetrievalResponse:
        if not self.enabled:
            return await anyio.to_thread.run_sync(self.sources.retrieve, request, limiter=self.limiter)
        key: _Key = (tuple(request.sources), request.k)
        group = self._open.get(key)
        if group is None or group.size + len(request.queries) > self.max_batch:
            group = _Group(key)
            self._open[key] = group
            # served by a task of its own: a client that leaves does not strand the others
            task = asyncio.ensure_future(self._serve(group))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        future: asyncio.Future[RetrievalResponse] = asyncio.get_running_loop().create_future()
        group.requests.append(request)
        group.futures.append(future)
        group.size += len(request.queries)
        return await future

    async def _serve(self, group: _Group) -> None:
        async with self.limiter:  # wait for a thread; the group grows meanwhile
            if self._open.get(group.key) is group:
                del self._open[group.key]
            if len(group.requests) == 1:
                await self._one_by_one(group)
                return
            try:
                merged = await anyio.to_thread.run_sync(self._retrieve_merged, group)
            except Exception:  # noqa: BLE001 — retried one by one, so the error reaches its own request
                await self._one_by_one(group)
                return
        self.batches += 1
        self.merged_requests += len(group.requests)
        start = 0
        for request, future in zip(group.requests, group.futures):
            end = start + len(request.queries)
            if not future.done():
                future.set_result(RetrievalResponse(
                    results={name: per_query[start:end] for name, per_query in merged.results.items()},
                    wall_ms=merged.wall_ms))
            start = end

    def _retrieve_merged(self, group: _Group) -> RetrievalResponse:
        sources, k = group.key
        queries = [q for request in group.requests for q in request.queries]
        return self.sources.retrieve(RetrievalRequest(queries=queries, k=k, sources=list(sources)))

    async def _one_by_one(self, group: _Group) -> None:
        """Inside the group's thread slot: each request on its own, each outcome to its own future."""
        for request, future in zip(group.requests, group.futures):
            try:
                response = await anyio.to_thread.run_sync(self.sources.retrieve, request)
            except Exception as exc:  # noqa: BLE001 — handed to the waiting request
                if not future.done():
                    future.set_exception(exc)
            else:
                if not future.done():
                    future.set_result(response)
