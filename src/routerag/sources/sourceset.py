"""A set of mounted sources that serves ``RetrievalRequest``s, fanning out concurrently."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

from routerag.sources.base import (
    QueryResult,
    RetrievalError,
    RetrievalRequest,
    RetrievalResponse,
    Source,
    Stopwatch,
)


class SourceSet:
    """Named sources; a request names which ones to query. Several sources run in parallel threads
    (FAISS, igraph and HTTP calls release the GIL)."""

    def __init__(self, sources: Iterable[Source] = ()) -> None:
        self._sources: dict[str, Source] = {}
        for source in sources:
            self.mount(source)

    def mount(self, source: Source, *, replace: bool = False) -> None:
        if source.name in self._sources and not replace:
            raise ValueError(f"a source named {source.name!r} is already mounted")
        self._sources[source.name] = source

    def unmount(self, name: str) -> None:
        self._sources.pop(name, None)

    def names(self) -> list[str]:
        return list(self._sources)

    def get(self, name: str) -> Source:
        try:
            return self._sources[name]
        except KeyError:
            raise RetrievalError(
                f"unknown source {name!r}; mounted: {', '.join(self._sources) or '(none)'}"
            ) from None

    def profiles(self) -> dict[str, str]:
        return {name: s.profile for name, s in self._sources.items()}

    def search(self, queries: Sequence[str], k: int, sources: Sequence[str]) -> RetrievalResponse:
        return self.retrieve(RetrievalRequest(queries=list(queries), k=k, sources=list(sources)))

    def retrieve(self, request: RetrievalRequest) -> RetrievalResponse:
        targets = [self.get(name) for name in request.sources]  # validate every name first
        with Stopwatch() as sw:
            if len(targets) == 1:
                results = {targets[0].name: targets[0].search(request.queries, request.k)}
            else:
                with ThreadPoolExecutor(max_workers=len(targets)) as pool:
                    futures = {s.name: pool.submit(s.search, request.queries, request.k) for s in targets}
                    results = {name: f.result() for name, f in futures.items()}
        for name, per_query in results.items():
            if len(per_query) != len(request.queries):
                raise RetrievalError(f"source {name!r} returned {len(per_query)} results for {len(request.queries)} queries")
        return RetrievalResponse(results=results, wall_ms=sw.ms)

    def search_one(self, query: str, k: int, source: str) -> QueryResult:
        return self.search([query], k, [source]).results[source][0]
