"""Typed settings of the two apps of ``routerag serve``: the retrieval API (:class:`ServerSettings`,
with how the Search-R1/RouteRAG adapter maps mode tags onto mounted sources) and the ask service
(:class:`ServiceSettings`). Where each listens, its key and limits come from
:class:`~routerag.edge.settings.ListenSettings`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from routerag.edge.settings import AdmissionSettings, ListenSettings, Port
from routerag.server.upload_parse import UploadSettings
from routerag.sources.base import MAX_BATCH, MAX_K, MAX_QUERY_CHARS

NATIVE_PATHS = frozenset({"/retrieve", "/sources", "/health", "/docs", "/redoc", "/openapi.json"})


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


class ServerSettings(ListenSettings):
    """Everything the retrieval app needs besides its sources (with an API key set, ``/retrieve``
    and ``/sources`` need it)."""

    port: Port = 8765
    max_batch: int = Field(MAX_BATCH, ge=1, le=MAX_BATCH, description="most queries in one request")
    max_k: int = Field(MAX_K, ge=1, le=MAX_K, description="largest k")
    max_query_chars: int = Field(MAX_QUERY_CHARS, ge=1, le=MAX_QUERY_CHARS, description="longest query")
    retrieval_threads: int = Field(4, ge=1, le=64, description="retrievals running at once in the worker threads")
    micro_batching: bool = Field(
        False, description="serve concurrent requests for the same sources and k that wait for a thread with one "
                           "retrieval call (up to max_batch queries); no delay is added. Off by default: its "
                           "measured gain on 2 cores was within the noise and p50 rose (docs/experiments/)")
    searchr1: SearchR1Settings = Field(default_factory=SearchR1Settings)


class ServiceSettings(ListenSettings):
    """The ask service (``routerag.server.app``): strategies over a model and sources, with the
    retrieval API mounted under ``/retrieval`` (with an API key set, ``/v1/*`` and ``/retrieval/*``
    need it)."""

    port: Port = 8700
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
    model_builds: Literal["child-process", "in-process"] = Field(
        "child-process", description="where models built after startup (a strategy's policy adapter, the warm-up's) "
        "load with the xllamacpp binding: in a child process, so a build never holds the service's GIL and /health "
        "keeps answering; in-process: in the service (xllamacpp's load then stalls every thread for seconds)")
    retrieval: ServerSettings = Field(default_factory=ServerSettings, description="the mounted retrieval API")
    admission: AdmissionSettings = Field(default_factory=AdmissionSettings,
                                         description="bounds on queued asks and run answers (429 over them)")

    def retrieval_settings(self) -> ServerSettings:
        """The mounted retrieval API shares this service's host, key, body limit and security settings."""
        return self.retrieval.model_copy(update={"host": self.host, "api_key": self.api_key,
                                                 "max_body_bytes": self.max_body_bytes, "security": self.security})
