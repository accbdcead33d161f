"""Typed settings of the retrieval server: where it listens, its limits, its optional API key,
and how the Search-R1/RouteRAG adapter maps mode tags onto mounted sources."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from routerag.provenance import FromRequest
from routerag.registry import is_plugin_name
from routerag.server.upload_parse import UploadSettings
from routerag.sources.base import MAX_BATCH, MAX_K, MAX_QUERY_CHARS

NATIVE_PATHS = frozenset({"/retrieve", "/sources", "/health", "/docs", "/redoc", "/openapi.json"})


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class SecuritySettings(BaseModel):
    """What the front door (:mod:`routerag.server.guard`) accepts; see docs/concepts/security.md."""

    model_config = ConfigDict(extra="forbid")

    allowed_hosts: list[str] | None = Field(
        None, description="Host header names served (\"*\" = any); default: the bound host, localhost, "
                          "127.0.0.1 and ::1 (any name when bound to 0.0.0.0/::, which needs an API key)")
    allowed_origins: list[str] = Field(
        default_factory=list, description="other browser origins (scheme://host:port) allowed to send "
                                          "state-changing requests; the server's own origin always is")
    body_timeout_s: float = Field(30.0, gt=0, le=3600, description="a request body must arrive within this time (408)")
    header_timeout_s: float = Field(
        10.0, gt=0, le=3600,
        description="a request's headers must have arrived this long after the connection opened (or its previous "
                    "response ended, once more bytes came); else the connection is closed — also one that sends nothing")
    keep_alive_timeout_s: int = Field(5, ge=1, le=3600, description="an idle keep-alive connection is closed after this time")
    max_header_bytes: int = Field(
        64 * 1024, ge=1024, le=16 * 1024 * 1024,
        description="bytes a request may send before its headers are complete; more: 431 and the connection is closed")
    max_json_depth: int = Field(32, ge=2, le=1000, description="deepest nesting of a JSON body (422)")
    allowed_plugins: list[str] = Field(
        default_factory=list,
        description="the ask service and the MCP server: plugin names (package.module:attribute) a request may give "
                    "where it names a registered part (a strategy, a router, a selector ...); a request naming any other "
                    "plugin is refused (422) before anything is imported. Plugins named in the configuration itself "
                    "need no entry")

    @field_validator("allowed_plugins")
    @classmethod
    def _check_plugins(cls, names: list[str]) -> list[str]:
        for name in names:
            if not is_plugin_name(name):
                raise ValueError(f"{name!r} is not a plugin name (package.module:attribute)")
        return names

    def from_request(self, data_dir: Path | None) -> FromRequest:
        """What a request may name here: registered parts, the allowed plugins, paths inside ``data_dir``."""
        return FromRequest(plugins=frozenset(self.allowed_plugins), data_dir=data_dir)


class SearchR1Settings(BaseModel):
    """The Search-R1 / RouteRAG compatibility endpoint.

    RouteRAG puts the retrieval mode in front of the query (``[passage] q``, ``[graph] q``,
    ``[graph][passage] q``). The adapter strips those tags and turns them into an explicit
    source: one tag -> ``tag_sources[tag]``; several tags -> ``combined_source``; no tag ->
    ``default_source``."""

    model_config = ConfigDict(extra="forbid")

    paths: list[str] = Field(
        default_factory=lambda: ["/retrieve/searchr1"],
        description="paths that accept Search-R1's {queries, topk, return_scores} body",
    )
    default_topk: int = Field(3, ge=1, le=MAX_K, description="k when the request gives no topk (Search-R1 uses 3)")
    max_queries: int = Field(
        8_192, ge=1, le=100_000,
        description="most queries in one request: a trainer sends every active rollout's query at once "
                    "(512 questions x 5 rollouts = 2,560); they are retrieved in chunks of max_batch")
    default_source: str = Field("passage", description="source for a query without a mode tag")
    tag_sources: dict[str, str] = Field(
        default_factory=lambda: {"passage": "passage", "graph": "graph", "bm25": "bm25", "hybrid": "hybrid"},
        description="mode tag -> mounted source name; a tag is a word without spaces, matched case-insensitively "
                    "([PASSAGE] is passage; [ passage ] or any other bracketed word is query text)",
    )
    combined_source: str = Field("hybrid", description="source for a query with several different tags")

    @field_validator("tag_sources")
    @classmethod
    def _check_tags(cls, tag_sources: dict[str, str]) -> dict[str, str]:
        """A tag is a word without spaces or brackets, read case-insensitively (stored lower-case)."""
        for tag in tag_sources:
            if not re.fullmatch(r"[^\[\]\s]{1,32}", tag):
                raise ValueError(f"mode tag {tag!r}: 1-32 characters without spaces or brackets")
        lowered = {tag.lower(): source for tag, source in tag_sources.items()}
        if len(lowered) != len(tag_sources):
            raise ValueError("a mode tag is listed twice (tags are case-insensitive)")
        return lowered

    @field_validator("paths")
    @classmethod
    def _check_paths(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if not path.startswith("/"):
                raise ValueError(f"path {path!r} must start with '/'")
            if path in NATIVE_PATHS:
                raise ValueError(f"path {path!r} is taken by the native API")
        if len(set(paths)) != len(paths):
            raise ValueError("a path is listed twice")
        return paths


class ServerSettings(BaseModel):
    """Everything the retrieval app needs besides its sources."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field("127.0.0.1", description="bind address; loopback unless you mean to expose it")
    port: int = Field(8765, ge=0, le=65535, description="TCP port (0 = any free port)")
    api_key: SecretStr | None = Field(
        None, description="when set, /retrieve and /sources need `X-API-Key: KEY` or `Authorization: Bearer KEY`"
    )
    max_body_bytes: int = Field(2_000_000, ge=1_024, description="larger request bodies get 413")
    max_batch: int = Field(MAX_BATCH, ge=1, le=MAX_BATCH, description="most queries in one request")
    max_k: int = Field(MAX_K, ge=1, le=MAX_K, description="largest k")
    max_query_chars: int = Field(MAX_QUERY_CHARS, ge=1, le=MAX_QUERY_CHARS, description="longest query")
    retrieval_threads: int = Field(4, ge=1, le=64, description="retrievals running at once in the worker threads")
    micro_batching: bool = Field(
        False, description="serve concurrent requests for the same sources and k that wait for a thread with one "
                           "retrieval call (up to max_batch queries); no delay is added. Off by default: its "
                           "measured gain on 2 cores was within the noise and p50 rose (docs/experiments/)")
    searchr1: SearchR1Settings = Field(default_factory=SearchR1Settings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)

    @model_validator(mode="after")
    def _check_exposure(self) -> "ServerSettings":
        if not is_loopback(self.host) and self.api_key is None:
            raise ValueError(
                f"binding {self.host!r} exposes the server beyond this machine; set an API key to do that"
            )
        return self


class AdmissionSettings(BaseModel):
    """Bounds on the work the ask service has accepted and not finished (``routerag.server.admission``):
    over a bound a request gets 429 with ``Retry-After`` and the bound's name."""

    model_config = ConfigDict(extra="forbid")

    max_asks: int = Field(
        64, ge=1, le=1_000_000,
        description="asks (/v1/ask, /v1/ask/stream, the chat endpoint) queued or running at once, across clients")
    max_asks_per_key: int | None = Field(
        None, ge=1, le=1_000_000,
        description="asks queued or running at once per API key (a hash of it; with api_key set); none: only max_asks")
    max_run_answers: int = Field(
        50_000, ge=1, le=100_000_000,
        description="answers (questions x configurations) of background runs not yet answered, across runs; "
                    "a run larger than this is refused (422)")
    max_run_answers_per_key: int | None = Field(
        None, ge=1, le=100_000_000, description="the same per API key (with api_key set); none: only max_run_answers")
    retry_after_s: int = Field(1, ge=1, le=3600, description="the Retry-After (seconds) of a 429")


class ServiceSettings(BaseModel):
    """The ask service (``routerag.server.app``): strategies over a model and sources, with the
    retrieval API mounted under ``/retrieval``."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field("127.0.0.1", description="bind address; loopback unless you mean to expose it")
    port: int = Field(8700, ge=0, le=65535, description="TCP port (0 = any free port)")
    api_key: SecretStr | None = Field(None, description="when set, /v1/* and /retrieval/* need the key")
    max_body_bytes: int = Field(2_000_000, ge=1_024, description="larger request bodies get 413")
    max_question_chars: int = Field(4_000, ge=1, le=100_000, description="longest question")
    max_new_tokens: int = Field(8_192, ge=16, le=131_072,
                                description="largest token limit a request may give a strategy (max_tokens, ...)")
    ask_threads: int = Field(4, ge=1, le=64, description="strategy runs of /v1/ask at once (worker threads)")
    run_workers: int = Field(1, ge=1, le=64, description="questions of background runs answered at once")
    max_run_questions: int = Field(5_000, ge=1, description="most questions in one background run")
    run_store_min_free_mb: int = Field(64, ge=0, description="a new run is refused (507) while the run store has "
                                                             "less free space than this (0: no check)")
    keep_runs: int = Field(100, ge=1, description="finished (or interrupted) runs kept on disk, their status in "
                                                  "memory (oldest dropped first)")
    data_dir: Path | None = Field(
        None, description="where uploaded sources and runs are kept; default: routerag.paths.cache_dir('service')"
    )
    uploads: UploadSettings = Field(default_factory=UploadSettings, description="limits on uploaded custom sources")
    ui: bool = Field(True, description="serve the web UI at /")
    warm_up: bool = Field(
        True, description="at startup, load what warm_up_strategy's first answer needs (its model and policy adapter, "
                          "the indexes of the sources it names) in a background thread; /ready is 503 until it is done")
    warm_up_strategy: str = Field("routerag", min_length=1, max_length=200,
                                  description="the strategy warmed up (the default of the MCP tools and the web UI)")
    retrieval: ServerSettings = Field(default_factory=ServerSettings, description="the mounted retrieval API")
    security: SecuritySettings = Field(default_factory=SecuritySettings, description="Host/Origin checks, body limits")
    admission: AdmissionSettings = Field(default_factory=AdmissionSettings,
                                         description="bounds on queued asks and run answers (429 over them)")

    @model_validator(mode="after")
    def _check_exposure(self) -> "ServiceSettings":
        if not is_loopback(self.host) and self.api_key is None:
            raise ValueError(
                f"binding {self.host!r} exposes the server beyond this machine; set an API key to do that"
            )
        return self

    def retrieval_settings(self) -> ServerSettings:
        """The mounted retrieval API shares this service's host, key, body limit and security settings."""
        return self.retrieval.model_copy(update={"host": self.host, "api_key": self.api_key,
                                                 "max_body_bytes": self.max_body_bytes, "security": self.security})
