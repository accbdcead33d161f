"""The retrieval HTTP API: ``POST /retrieve``, ``GET /sources``, ``GET /health``.

The app serves a :class:`~routerag.sources.sourceset.SourceSet`. Requests are the library's own
typed :class:`~routerag.sources.base.RetrievalRequest` (explicit sources, batched queries, ``k``)
and answers are :class:`~routerag.sources.base.RetrievalResponse` — the same types a caller in
the same process would use, so :class:`~routerag.sources.remote.RemoteSource` is a thin client.

Retrieval runs in worker threads (never on the event loop); bad input gets a 4xx whose
``detail`` says what is wrong.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from fastapi import Depends, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, SecretStr, StrictInt

from routerag.edge.guard import RequestGuard, key_problem
from routerag.server.batching import RequestBatcher
from routerag.server.errors import ERRORS, ApiError, validation_detail
from routerag.server.searchr1_adapter import build_searchr1_router
from routerag.server.settings import ServerSettings
from routerag.sources.base import MAX_K, RetrievalError, RetrievalRequest, RetrievalResponse
from routerag.sources.remote import Limits, RemoteSourceError, SourceInfo, SourcesReply
from routerag.sources.sourceset import SourceSet

log = logging.getLogger(__name__)

API_VERSION = "1"


class HealthReply(BaseModel):
    status: str
    sources: int
    api_version: str = API_VERSION


# --------------------------------------------------------------------------- limits & threads


class StrictRetrievalRequest(RetrievalRequest):
    """The HTTP form of :class:`RetrievalRequest`: unknown fields and ``k: true`` / ``k: "3"`` are
    refused (422) instead of silently ignored or converted."""

    model_config = ConfigDict(extra="forbid")

    k: StrictInt = Field(default=5, ge=1, le=MAX_K)


class RetrievalRunner:
    """Checks a request against the server's limits and runs it in a worker thread."""

    def __init__(self, sources: SourceSet, settings: ServerSettings) -> None:
        self.sources = sources
        self.settings = settings
        self.batcher = RequestBatcher(sources, threads=settings.retrieval_threads, max_batch=settings.max_batch,
                                      enabled=settings.micro_batching)

    @property
    def limits(self) -> Limits:
        s = self.settings
        return Limits(max_batch=s.max_batch, max_k=s.max_k, max_query_chars=s.max_query_chars)

    def check(self, request: RetrievalRequest) -> None:
        """Server limits (may be stricter than the protocol's) and source names -> 422."""
        s = self.settings
        if len(request.queries) > s.max_batch:
            raise ApiError(422, f"{len(request.queries)} queries in one request; this server takes at most {s.max_batch}")
        if request.k > s.max_k:
            raise ApiError(422, f"k={request.k} is above this server's limit of {s.max_k}")
        for i, query in enumerate(request.queries):
            if len(query) > s.max_query_chars:
                raise ApiError(422, f"query {i} has {len(query)} characters; this server takes at most {s.max_query_chars}")
        for name in request.sources:
            self.sources.get(name)  # RetrievalError names the mounted sources

    async def run(self, request: RetrievalRequest) -> RetrievalResponse:
        self.check(request)
        return await self.batcher.run(request)

    def describe(self) -> SourcesReply:
        infos = []
        for name in self.sources.names():
            source = self.sources.get(name)
            infos.append(SourceInfo(name=name, mode=source.mode, profile=source.profile))
        return SourcesReply(sources=infos, limits=self.limits)


# --------------------------------------------------------------------------- auth


def api_key_dependency(api_key: SecretStr | None) -> Callable[[Request], Awaitable[None]]:
    """A dependency that accepts ``X-API-Key: KEY`` or ``Authorization: Bearer KEY`` (or nothing,
    when no key is configured). State-changing requests are also checked by the front door
    (:class:`~routerag.edge.guard.RequestGuard`) before their body is read."""

    async def require_key(request: Request) -> None:
        problem = key_problem(request.headers, api_key)
        if problem:
            raise ApiError(401, problem, {"WWW-Authenticate": "Bearer"})

    return require_key


# --------------------------------------------------------------------------- error replies


def install_error_handlers(app: FastAPI) -> None:
    """Every error reply is ``{"detail": "<reason>"}`` (validation errors add ``errors``)."""

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        status, detail, errors = validation_detail(exc)
        return JSONResponse({"detail": detail, "errors": errors}, status_code=status)

    @app.exception_handler(RetrievalError)
    async def _retrieval_error(_: Request, exc: RetrievalError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=422)

    @app.exception_handler(RemoteSourceError)
    async def _upstream(_: Request, exc: RemoteSourceError) -> JSONResponse:
        return JSONResponse({"detail": f"an upstream retrieval server failed: {exc}"}, status_code=502)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        operation = f"{request.method} {request.url.path}"
        log.error("internal error in %s", operation, exc_info=exc)
        return JSONResponse({"detail": f"internal error in {operation} ({type(exc).__name__})"}, status_code=500)


# --------------------------------------------------------------------------- the app


def create_retrieval_app(sources: SourceSet, settings: ServerSettings | None = None) -> FastAPI:
    """A FastAPI app serving ``sources``; the OpenAPI docs are at ``/docs``."""
    settings = settings or ServerSettings()
    runner = RetrievalRunner(sources, settings)
    require_key = api_key_dependency(settings.api_key)

    app = FastAPI(
        title="routerag retrieval server",
        version=API_VERSION,
        description="Batched retrieval over named sources (passage, bm25, graph, hybrid, ...). "
        "Search-R1 / RouteRAG trainers can use the compatibility endpoint(s): "
        + ", ".join(settings.searchr1.paths),
    )
    app.state.runner = runner
    install_error_handlers(app)
    app.add_middleware(RequestGuard, bind_host=settings.host, api_key=settings.api_key, max_body_bytes=settings.max_body_bytes, security=settings.security)

    @app.post("/retrieve", response_model=RetrievalResponse, responses=ERRORS, dependencies=[Depends(require_key)],
              summary="retrieve top-k hits for a batch of queries from the named sources")
    async def retrieve(request: StrictRetrievalRequest, response: Response) -> RetrievalResponse:
        result = await runner.run(request)
        response.headers["Server-Timing"] = f"retrieve;dur={result.wall_ms:.2f}"
        return result

    @app.get("/sources", response_model=SourcesReply, responses={401: ERRORS[401]},
             dependencies=[Depends(require_key)], summary="the mounted sources, their modes and profiles")
    async def list_sources() -> SourcesReply:
        return runner.describe()

    @app.get("/health", response_model=HealthReply, summary="liveness (needs no API key)")
    async def health() -> HealthReply:
        return HealthReply(status="ok", sources=len(sources.names()))

    app.include_router(build_searchr1_router(runner, settings.searchr1, require_key))
    return app
