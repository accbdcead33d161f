"""Search-R1 / RouteRAG compatibility: their trainers POST ``{queries, topk, return_scores}`` and
read ``{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}``.

RouteRAG hides the retrieval mode in the query (``[graph][passage] who ...``). That convention
ends here: :func:`parse_mode_tags` (the protocol module's
:func:`~routerag.protocol.routerag_tags.leading_mode_tags`) strips the tags and :class:`TagRouter` turns them into an
explicit source name, so everything behind this module sees an ordinary ``RetrievalRequest``.

``contents`` is ``"\\"title\\"\\ntext"`` — the first line is the quoted title, as in the
FlashRAG/Search-R1 corpora, whose trainers split it off that way. With ``return_scores: false``
Search-R1 answers bare documents (no ``document``/``score`` wrapper); so does this adapter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from routerag.protocol.routerag_tags import leading_mode_tags as parse_mode_tags
from routerag.protocol.routerag_tags import render_tags
from routerag.server.errors import ERRORS, ApiError
from routerag.server.settings import SearchR1Settings, ServerSettings
from routerag.sources.base import MAX_K, RetrievalRequest, RetrievalResponse
from routerag.trace import Hit


class SearchR1Request(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt "top_k" would otherwise silently give 3 hits

    queries: list[str] = Field(min_length=1, description="at most SearchR1Settings.max_queries (default 8,192)")
    topk: StrictInt | None = Field(None, ge=1, le=MAX_K, description="hits per query (server default when omitted)")
    return_scores: StrictBool = Field(False, description="wrap each document as {document, score}")


class SearchR1Document(BaseModel):
    id: str
    contents: str  # '"title"\ntext'


class SearchR1Scored(BaseModel):
    document: SearchR1Document
    score: float


class SearchR1Response(BaseModel):
    result: list[list[SearchR1Scored]] | list[list[SearchR1Document]]


class RoutingError(ValueError):
    """A query whose tags name no mounted source."""


class TagRouter:
    """Mode tags -> one explicit source name (see :class:`SearchR1Settings`)."""

    def __init__(self, settings: SearchR1Settings) -> None:
        self.settings = settings

    def route(self, tags: tuple[str, ...]) -> str:
        s = self.settings
        if not tags:
            return s.default_source
        unknown = [t for t in tags if t not in s.tag_sources]
        if unknown:
            raise RoutingError(
                f"unknown mode tag {render_tags(unknown[:1])}; known tags: {', '.join(render_tags([t]) for t in sorted(s.tag_sources))}"
            )
        if len(tags) == 1:
            return s.tag_sources[tags[0]]
        return s.combined_source


def contents_of(hit: Hit) -> str:
    return f'"{hit.title}"\n{hit.text}'


class Runner(Protocol):
    """What the adapter needs of :class:`routerag.server.retrieval_app.RetrievalRunner` (which
    mounts this adapter: a structural type, so the two modules do not import each other)."""

    settings: ServerSettings

    def check(self, request: RetrievalRequest) -> None: ...

    async def run(self, request: RetrievalRequest) -> RetrievalResponse: ...


def build_searchr1_router(
    runner: Runner,
    settings: SearchR1Settings,
    require_key: Callable[[Request], Awaitable[None]],
) -> APIRouter:
    """Routes for every path in ``settings.paths``, served by the same runner as ``/retrieve``."""
    router = APIRouter(tags=["search-r1 compatibility"])
    tag_router = TagRouter(settings)

    async def searchr1(body: SearchR1Request) -> SearchR1Response:
        limits = runner.settings
        if len(body.queries) > settings.max_queries:
            raise ApiError(422, f"{len(body.queries)} queries in one request; this endpoint takes at most "
                                f"{settings.max_queries} (searchr1.max_queries)")
        k = body.topk or settings.default_topk
        if k > limits.max_k:
            raise ApiError(422, f"topk={k} is above this server's limit of {limits.max_k}")
        groups: dict[str, list[int]] = {}
        texts: list[str] = []
        for i, raw in enumerate(body.queries):
            if len(raw) > limits.max_query_chars:
                raise ApiError(422, f"query {i} has {len(raw)} characters; this server takes at most {limits.max_query_chars}")
            tags, text = parse_mode_tags(raw)
            if not text:
                raise ApiError(422, f"query {i} is empty once its mode tags are removed")
            try:
                source = tag_router.route(tags)
            except RoutingError as exc:
                raise ApiError(422, f"query {i}: {exc}") from None
            texts.append(text)
            groups.setdefault(source, []).append(i)
        # every group in chunks of the server's batch size, all checked before any runs
        chunks: list[tuple[str, list[int], RetrievalRequest]] = []
        for source, idx in groups.items():
            for start in range(0, len(idx), limits.max_batch):
                part = idx[start : start + limits.max_batch]
                request = RetrievalRequest(queries=[texts[i] for i in part], k=k, sources=[source])
                runner.check(request)
                chunks.append((source, part, request))
        replies = await asyncio.gather(*(runner.run(request) for _, _, request in chunks))
        hits_per_query: list[list[Hit]] = [[] for _ in body.queries]
        for (source, part, _), reply in zip(chunks, replies):
            for i, result in zip(part, reply.results[source]):
                hits_per_query[i] = result.hits
        if body.return_scores:
            scored = [
                [SearchR1Scored(document=SearchR1Document(id=h.doc_id, contents=contents_of(h)), score=h.score) for h in hits]
                for hits in hits_per_query
            ]
            return SearchR1Response(result=scored)
        docs = [[SearchR1Document(id=h.doc_id, contents=contents_of(h)) for h in hits] for hits in hits_per_query]
        return SearchR1Response(result=docs)

    for path in settings.paths:
        router.add_api_route(
            path,
            searchr1,
            methods=["POST"],
            response_model=SearchR1Response,
            responses=ERRORS,
            dependencies=[Depends(require_key)],
            summary="Search-R1 / RouteRAG request shape; leading [mode] tags pick the source",
        )
    return router
