"""A ``Source`` served by another routerag retrieval server, over HTTP.

``RetrievalClient`` talks to one server (connection pool, timeouts, retries with exponential
backoff on connection errors and 502/503/504); ``RemoteSource`` is one of that server's sources
mounted locally. The wire types (``SourceInfo``, ``Limits``, ``SourcesReply``) live here and the
server imports them, so both sides agree by construction.

Errors: a request the server refuses (4xx) raises :class:`RetrievalError` carrying the
server's reason; an unreachable or failing server raises :class:`RemoteSourceError`.
"""

from __future__ import annotations

import os
import time
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from routerag.errors import RouteragError
from routerag.sources.base import BaseSource, QueryResult, RetrievalError, RetrievalRequest, RetrievalResponse


class SourceInfo(BaseModel):
    name: str
    mode: str
    profile: str


class Limits(BaseModel):
    max_batch: int
    max_k: int
    max_query_chars: int


class SourcesReply(BaseModel):
    sources: list[SourceInfo]
    limits: Limits


class RemoteSourceError(RouteragError, RuntimeError):
    """The retrieval server could not be reached, rejected our credentials, or failed (5xx)."""


RETRY_STATUSES = frozenset({502, 503, 504})


class RetrievalClient:
    """A synchronous client for one routerag retrieval server. Thread-safe; share it between
    the ``RemoteSource`` objects of one server."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 3.0,
        retries: int = 2,
        backoff_s: float = 0.2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"retrieval server url {url!r} must start with http:// or https://")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.url = url.rstrip("/")
        self.retries = retries
        self.backoff_s = backoff_s
        headers = {"X-API-Key": api_key} if api_key else {}
        self._http = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            transport=transport,
        )
        self._info: SourcesReply | None = None

    # ---- lifecycle
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "RetrievalClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- calls
    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        last: str = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                response = self._http.request(method, path, json=body)
            except httpx.TransportError as exc:  # connect refused, timeouts, dropped connection
                last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                continue
            if response.status_code in RETRY_STATUSES:
                last = f"HTTP {response.status_code}: {_reason(response)}"
                continue
            if response.status_code == 401:
                raise RemoteSourceError(f"{self.url}{path} rejected the API key: {_reason(response)}")
            if 400 <= response.status_code < 500:
                raise RetrievalError(f"{self.url}{path} refused the request (HTTP {response.status_code}): {_reason(response)}")
            if response.status_code >= 500:
                raise RemoteSourceError(f"{self.url}{path} failed (HTTP {response.status_code}): {_reason(response)}")
            try:
                return response.json()
            except ValueError:
                raise RemoteSourceError(f"{self.url}{path} answered with a body that is not JSON") from None
        attempts = self.retries + 1
        raise RemoteSourceError(
            f"retrieval server {self.url} is unreachable ({attempts} attempt{'s' * (attempts > 1)}): {last}"
        )

    def info(self, *, refresh: bool = False) -> SourcesReply:
        """The server's sources and limits (``GET /sources``), cached."""
        if self._info is None or refresh:
            self._info = _parse(SourcesReply, self._call("GET", "/sources"), self.url)
        return self._info

    def healthy(self) -> bool:
        try:
            return self._http.get("/health").status_code == 200
        except httpx.TransportError:
            return False

    def retrieve(self, request: RetrievalRequest) -> RetrievalResponse:
        """``POST /retrieve``; a batch above the server's ``max_batch`` is sent in several calls."""
        max_batch = self.info().limits.max_batch
        queries = request.queries
        if len(queries) <= max_batch:
            return _parse(RetrievalResponse, self._call("POST", "/retrieve", request.model_dump()), self.url)
        merged: dict[str, list[QueryResult]] = {name: [] for name in request.sources}
        wall_ms = 0.0
        for start in range(0, len(queries), max_batch):
            part = request.model_copy(update={"queries": queries[start : start + max_batch]})
            reply = _parse(RetrievalResponse, self._call("POST", "/retrieve", part.model_dump()), self.url)
            for name in request.sources:
                merged[name].extend(reply.results[name])
            wall_ms += reply.wall_ms
        return RetrievalResponse(results=merged, wall_ms=wall_ms)


def _reason(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    if isinstance(detail, str) and detail:
        return detail
    return response.text[:300] or response.reason_phrase


def _parse(model: type[BaseModel], data: Any, url: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise RemoteSourceError(f"{url} answered in an unexpected shape for {model.__name__}: {exc}") from None


class RemoteSource(BaseSource):
    """One source of a remote retrieval server, mounted locally (optionally under another name).

    ``mode`` and ``profile`` are taken from the server's ``/sources`` unless given; a source the
    server does not mount is an error here, not at the first search."""

    def __init__(
        self,
        url: str | RetrievalClient,
        source: str,
        *,
        name: str | None = None,
        mode: str | None = None,
        profile: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        retries: int = 2,
    ) -> None:
        self.client = url if isinstance(url, RetrievalClient) else RetrievalClient(
            url, api_key=api_key, timeout_s=timeout_s, retries=retries
        )
        self.remote_name = source
        self.name = name or source
        if mode is None or profile is None:
            info = {s.name: s for s in self.client.info().sources}
            if source not in info:
                raise RetrievalError(
                    f"{self.client.url} has no source {source!r}; it serves: {', '.join(info) or '(none)'}"
                )
            mode = mode if mode is not None else info[source].mode
            profile = profile if profile is not None else info[source].profile
        self.mode = mode
        self.profile = profile

    def _search(self, queries: list[str], k: int) -> list[QueryResult]:
        request = RetrievalRequest(queries=queries, k=k, sources=[self.remote_name])
        t0 = time.perf_counter()
        reply = self.client.retrieve(request)
        per_query_ms = (time.perf_counter() - t0) * 1000.0 / len(queries)
        results = reply.results.get(self.remote_name)
        if results is None or len(results) != len(queries):
            raise RemoteSourceError(f"{self.client.url} returned no aligned results for source {self.remote_name!r}")
        out = []
        for result in results:
            hits = [h.model_copy(update={"source": self.name}) for h in result.hits]
            metadata = {"kind": "remote", "url": self.client.url, "server_latency_ms": result.latency_ms,  # a trace.RemoteRetrieval
                        "details": result.metadata or None}
            out.append(result.model_copy(update={"source": self.name, "hits": hits,
                                                 "latency_ms": per_query_ms, "metadata": metadata}))
        return out

    def close(self) -> None:
        self.client.close()

    def __repr__(self) -> str:
        return f"RemoteSource({self.client.url!r}, source={self.remote_name!r}, name={self.name!r}, mode={self.mode!r})"


class RemoteSourceConfig(BaseModel):
    """A remote source as written in a configuration file (the API key comes from the environment)."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="base URL of a routerag retrieval server, e.g. http://127.0.0.1:8765")
    source: str = Field(description="the source's name on that server")
    name: str | None = Field(None, description="local name (default: the remote name)")
    api_key_env: str | None = Field(None, description="environment variable holding the server's API key")
    timeout_s: float = Field(30.0, gt=0, description="read timeout per call")
    retries: int = Field(2, ge=0, le=10, description="retries on connection errors and 502/503/504")

    def build(self) -> RemoteSource:
        api_key = None
        if self.api_key_env:
            api_key = os.environ.get(self.api_key_env)
            if not api_key:
                raise ValueError(f"environment variable {self.api_key_env} (the API key for {self.url}) is not set")
        return RemoteSource(self.url, self.source, name=self.name, api_key=api_key,
                            timeout_s=self.timeout_s, retries=self.retries)


def remote_sources(url: str, *, api_key: str | None = None, timeout_s: float = 30.0, retries: int = 2) -> list[RemoteSource]:
    """Every source of the server at ``url``, sharing one connection pool."""
    client = RetrievalClient(url, api_key=api_key, timeout_s=timeout_s, retries=retries)
    return [RemoteSource(client, s.name, mode=s.mode, profile=s.profile) for s in client.info().sources]
