"""Search-R1 / RouteRAG compatibility: their trainers POST ``{queries, topk, return_scores}`` and
read ``{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}``.

RouteRAG hides the retrieval mode in the query (``[graph][passage] who ...``). That convention
ends here: :func:`parse_mode_tags` (the protocol module's
:func:`~routerag.protocol.routerag_tags.leading_mode_tags`) strips the tags and :class:`TagRouter` turns them into an
explicit source name, so everything behind this module sees an ordinary ``RetrievalRequest``.

Mode tags are exactly the names in ``SearchR1Settings.tag_sources``, case-insensitive, written
without inner spaces (``[PASSAGE]`` is a tag; ``[ passage ]``, ``[1990s]`` and ``[Lothair II]``
are query text). As Search-R1's own retriever, one bad query never fails a batch: a query empty
once its tags are removed gets ``[]``, one over ``max_query_chars`` is searched cut to the limit,
one whose tag names a source this server does not mount gets ``[]``; their positions are listed
in the reply (``empty``, ``truncated``, ``unrouted``) and counted in ``X-Empty-Queries``,
``X-Truncated-Queries`` and ``X-Unrouted-Queries``. The batch fails (4xx) only for a body that is
not valid JSON of this shape, more than ``max_queries`` queries or ``topk`` over the limit.

``contents`` is ``"\\"title\\"\\ntext"`` — the first line is the quoted title, as in the
FlashRAG/Search-R1 corpora, whose trainers split it off that way. With ``return_scores: false``
Search-R1 answers bare documents (no ``document``/``score`` wrapper); so does this adapter.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from routerag.errors import RouteragError
from routerag.protocol.routerag_tags import leading_mode_tags as parse_mode_tags
from routerag.protocol.routerag_tags import render_tags
from routerag.server.errors import ERRORS, ApiError
from routerag.server.settings import SearchR1Settings, ServerSettings
from routerag.sources.base import MAX_K, RetrievalError, RetrievalRequest, RetrievalResponse
from routerag.trace import Hit

log = logging.getLogger(__name__)


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
    """``result`` has one list per query, in order, always. The other fields (ignored by
    Search-R1's client) name the positions answered by the tolerance rules instead of a search."""

    result: list[list[SearchR1Scored]] | list[list[SearchR1Document]]
    empty: list[int] = Field(default_factory=list, description="queries empty once their mode tags are removed: answered []")
    truncated: list[int] = Field(default_factory=list, description="queries over max_query_chars: searched cut to the limit")
    unrouted: list[int] = Field(default_factory=list,
                                description="queries whose mode tag names a source this server does not mount: answered []")


EMPTY_HEADER = "X-Empty-Queries"
TRUNCATED_HEADER = "X-Truncated-Queries"
UNROUTED_HEADER = "X-Unrouted-Queries"


class UnknownModeTagError(RouteragError, ValueError):
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
            raise UnknownModeTagError(
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

    known_tags = frozenset(t.lower() for t in settings.tag_sources)

    async def searchr1(body: SearchR1Request, response: Response) -> SearchR1Response:
        limits = runner.settings
        if len(body.queries) > settings.max_queries:
            raise ApiError(422, f"{len(body.queries)} queries in one request; this endpoint takes at most "
                                f"{settings.max_queries} (searchr1.max_queries)")
        k = body.topk or settings.default_topk
        if k > limits.max_k:
            raise ApiError(422, f"topk={k} is above this server's limit of {limits.max_k}")
        # one bad query never fails the batch (a trainer's step would stop): it is answered for its
        # own position (empty, or cut) and counted in the reply
        empty: list[int] = []
        truncated: list[int] = []
        unrouted: list[int] = []
        groups: dict[str, list[int]] = {}
        texts: dict[int, str] = {}
        for i, raw in enumerate(body.queries):
            tags, text = parse_mode_tags(raw, known_tags)
            if len(text) > limits.max_query_chars:
                text = text[: limits.max_query_chars].strip()
                truncated.append(i)
            if not text:
                empty.append(i)
                continue
            texts[i] = text
            groups.setdefault(tag_router.route(tags), []).append(i)
        # every group in chunks of the server's batch size, all checked before any runs
        chunks: list[tuple[str, list[int], RetrievalRequest]] = []
        for source, idx in groups.items():
            for start in range(0, len(idx), limits.max_batch):
                part = idx[start : start + limits.max_batch]
                request = RetrievalRequest(queries=[texts[i] for i in part], k=k, sources=[source])
                try:
                    runner.check(request)
                except RetrievalError as exc:  # a tag whose source this server does not mount
                    log.warning("search-r1 queries answered empty: %s", exc)
                    unrouted.extend(part)
                    continue
                chunks.append((source, part, request))
        replies = await asyncio.gather(*(runner.run(request) for _, _, request in chunks))
        hits_per_query: list[list[Hit]] = [[] for _ in body.queries]
        for (source, part, _), reply in zip(chunks, replies):
            for i, result in zip(part, reply.results[source]):
                hits_per_query[i] = result.hits
        response.headers[EMPTY_HEADER] = str(len(empty))
        response.headers[TRUNCATED_HEADER] = str(len(truncated))
        response.headers[UNROUTED_HEADER] = str(len(unrouted))
        notes = {"empty": empty, "truncated": truncated, "unrouted": sorted(unrouted)}
        if body.return_scores:
            scored = [
                [SearchR1Scored(document=SearchR1Document(id=h.doc_id, contents=contents_of(h)), score=h.score) for h in hits]
                for hits in hits_per_query
            ]
            return SearchR1Response(result=scored, **notes)
        docs = [[SearchR1Document(id=h.doc_id, contents=contents_of(h)) for h in hits] for hits in hits_per_query]
        return SearchR1Response(result=docs, **notes)

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
