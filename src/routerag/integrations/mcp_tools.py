"""What the MCP server's tools do, without the MCP SDK: ``search`` one mounted source, ``route`` a
query to the source a routerag router chooses and search it there
(:func:`~routerag.integrations.routed.route_and_search`), ``ask`` a question with a strategy,
``list_sources``. The index is mounted once (as ``routerag serve``
mounts it: :func:`~routerag.api.serving.mounted_sources`); every search and answer goes through
the code the service uses (``SourceSet.retrieve`` with the validated request of ``routerag
retrieve``; for ``ask``, the service's ask path, :mod:`routerag.edge.asks`: the question checked,
the strategy prepared, the run cancellable), and the model for ``ask`` is the configured one,
built on the first question that needs it (:class:`~routerag.llm.pool.ModelPool`: the shipped
policy for ``routerag`` on the bundled base, as ``routerag ask`` runs it).

A request the tools refuse raises a :class:`~routerag.errors.RouteragError` whose message says
why; the server (``mcp_server``) hands it back as the tool's error result."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from routerag.edge.settings import AdmissionSettings, ListenSettings, Port
from routerag.errors import RouteragError
from routerag.integrations.routed import RoutedSearch
from routerag.llm.config import ModelConfig
from routerag.llm.llama_bindings import for_service
from routerag.progress import Announce
from routerag.registry import RegisteredName
from routerag.routing import ROUTERS, Router, RouterModel
from routerag.routing.keyword import RouterRules
from routerag.sources.sourceset import SourceSet
from routerag.trace import Hit, Route, Trace

if TYPE_CHECKING:
    from routerag.edge.asks import PreparedStrategy

DEFAULT_K = 5
DEFAULT_STRATEGY = "routerag"
DEFAULT_ROUTER = "profile-embedding"  # serves any set of sources (the learned mode router: passage, bm25, graph, hybrid)

RouterName = Annotated[str, RegisteredName(ROUTERS)]


class McpRequestError(RouteragError, ValueError):
    """A tool call or a configuration the server refuses (an unknown source or router, an empty query)."""


class McpSettings(ListenSettings):
    """The MCP server (``routerag mcp``): its transport, what its tools accept and the model ``ask`` runs.
    ``host``, ``port``, ``api_key``, ``max_body_bytes`` and ``security``'s Host/Origin checks and limits
    are the http transport's (with an API key set, every request needs it); ``security``'s
    ``allowed_plugins`` apply to both transports."""

    transport: Literal["stdio", "http"] = Field(
        "stdio", description="stdio: the client starts `routerag mcp` itself; http: streamable HTTP at `path`")
    port: Port = 8710
    path: str = Field("/mcp", pattern=r"^/", description="http: the endpoint's path")
    default_source: str | None = Field(
        None, description="the source `search` uses when the call names none; None: passage if mounted, else the first")
    router: RouterName = Field(
        DEFAULT_ROUTER, description="the router `route` uses when the call names none (routerag.routing.ROUTERS): "
        "profile-embedding, learned, keyword (with router_rules), or a plugin")
    router_model: RouterModel | None = Field(
        None, description="learned router: a shipped router's name or a model folder (default: the shipped one whose "
        "labels cover the mounted sources); a call may name a shipped one")
    router_rules: RouterRules | None = Field(
        None, description="keyword router: its rules file (YAML: rules: [{pattern, choice}, ...], default); "
        "the operator's configuration only")
    max_question_chars: int = Field(4_000, ge=1, le=100_000, description="longest question `ask` takes")
    max_new_tokens: int = Field(8_192, ge=16, le=131_072,
                                description="largest token limit a call's strategy params may give (max_tokens, ...)")
    model: ModelConfig = Field(default_factory=ModelConfig, description="the model `ask` answers with (built on the first ask)")
    ask_threads: int = Field(4, ge=1, le=64, description="`ask` runs at once (worker threads of their own; "
                                                         "the other tools keep theirs)")
    admission: AdmissionSettings = Field(
        default_factory=AdmissionSettings,
        description="asks admitted at once, as `routerag serve` bounds them: max_asks across clients, max_asks_per_key "
                    "per API key (http); an ask beyond a bound is the tool's error result naming it (the run_answers "
                    "bounds do not apply here)")

    def binds(self) -> bool:
        """Only the http transport listens on an address."""
        return self.transport == "http"


class SearchResult(BaseModel):
    query: str
    source: str
    hits: list[Hit] = Field(description="the hits as routerag's traces record them (title, text, score, source, mode, doc_id, 1-based rank, metadata)")
    latency_ms: float


class RouteRequest(BaseModel):
    """What a ``route`` call names, validated as a request's: a registered router (or a plugin the
    operator allowed) and a shipped router model (no path)."""

    model_config = ConfigDict(extra="forbid")

    router: RouterName | None = None  # None: the operator's (McpSettings.router)
    router_model: RouterModel | None = None


class McpSourceInfo(BaseModel):
    name: str = Field(description="what `search` takes as `source`")
    mode: str = Field(description="the kind of retrieval: passage (dense), bm25, graph, hybrid, triples")
    profile: str = Field(description="what it holds")


class SourcesResult(BaseModel):
    sources: list[McpSourceInfo]
    default: str = Field(description="the source `search` uses when none is named")
    documents: int = Field(description="documents in the index")
    index: str = Field(description="the index directory")


class AskSearch(BaseModel):
    """One search the strategy made while answering, with its evidence."""

    sources: list[str]
    query: str | None
    titles: list[str] = Field(description="titles of the hits it got, best first")
    hits: list[Hit] = Field(description="the hits it got (title, text, score, source, mode, doc_id, rank, metadata)")
    route: Route | None = Field(None, description="why it searched there, when a policy or router chose the source")


class AskResult(BaseModel):
    question: str
    answer: str
    strategy: str
    error: str | None = Field(None, description="why the strategy stopped early (the answer may be empty)")
    searches: list[AskSearch]
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    model: str = Field(description="the model that answered (with its policy adapter, if any)")


def ask_result(trace: Trace, model: str) -> AskResult:
    """A trace summarised for an agent: the answer, each search (where, what, the hits it got and
    why there), the cost."""
    searches = [AskSearch(sources=list(step.sources), query=step.query, titles=[hit.title for hit in step.hits],
                          hits=list(step.hits), route=step.route)
                for step in trace.search_steps]
    return AskResult(question=trace.question, answer=trace.answer, strategy=trace.strategy, error=trace.error,
                     searches=searches, prompt_tokens=trace.prompt_tokens, completion_tokens=trace.completion_tokens,
                     latency_ms=round(trace.latency_ms, 2), model=model)


class McpTools:
    """The tools over one mounted index; thread-safe (each call runs in a worker thread)."""

    def __init__(self, sources: SourceSet, settings: McpSettings, *, index_dir: Path, documents: int) -> None:
        from routerag.api.environment import model_environment
        from routerag.edge.asks import Answerer, Preparation
        from routerag.llm.factory import DeferredModel

        if not sources.names():
            raise McpRequestError(f"{index_dir}: no source could be mounted")
        self.sources = sources
        self.settings = settings
        self.index_dir = index_dir
        self.documents = documents
        self.default_source = self._default_source(settings.default_source)
        self.routers: dict[tuple[str, str | None], Router] = {}  # built once per (router, model)
        self._routers_lock = threading.Lock()
        try:
            from routerag.routing.keyword import load_rules

            self.rules = load_rules(settings.router_rules) if settings.router_rules else None
        except RouteragError as exc:
            raise McpRequestError(f"router_rules: {exc}") from None
        # the service's checks: strict params, registered names (no path), named sources mounted, token limits
        # every model loads on a first ask, beside the server's event loop: xllamacpp's in a child process,
        # whose loader cannot hold this process's GIL (routerag.llm.xllamacpp_process)
        try:  # the model environment, read once at the start; nothing loads before an ask
            model = settings.model.with_environment(model_environment())
            model = model.model_copy(update={"binding": for_service(model.binding)})
            preparation = Preparation(sources, settings.max_new_tokens, model, settings.security.from_request(None))
            self.answerer = Answerer(preparation, DeferredModel(model), settings.max_question_chars)
        except ValueError as exc:
            raise McpRequestError(f"model: {exc}") from None

    @classmethod
    def open(cls, index_dir: Path, settings: McpSettings, modes: list[str] | None = None, *,
             announce: Announce = lambda _: None) -> McpTools:
        """Mount the index's sources (``modes``, or all) once; each that cannot be mounted is announced."""
        from routerag.api.serving import mounted_sources
        from routerag.index.bundle import read_bundle_manifest

        documents = read_bundle_manifest(index_dir).n_docs
        return cls(mounted_sources(index_dir, modes, announce), settings, index_dir=index_dir, documents=documents)

    def _default_source(self, configured: str | None) -> str:
        names = self.sources.names()
        if configured is not None:
            if configured not in names:
                raise McpRequestError(f"default_source {configured!r} is not mounted; mounted: {', '.join(names)}")
            return configured
        return "passage" if "passage" in names else names[0]

    def search(self, query: str, source: str | None = None, k: int = DEFAULT_K) -> SearchResult:
        from routerag.api.indexing import retrieval_request

        if not query.strip():
            raise McpRequestError("the query is empty")
        name = source or self.default_source
        # an invalid request, then an unknown source: a RouteragError saying why (naming the mounted ones)
        result = self.sources.retrieve(retrieval_request([query], k, [name])).results[name][0]
        return SearchResult(query=query, source=name, hits=result.hits, latency_ms=round(result.latency_ms, 2))

    def route(self, query: str, router: str | None = None, k: int = DEFAULT_K,
              router_model: str | None = None) -> RoutedSearch:
        """Route ``query`` across the mounted sources with ``router`` (default: the configured one)
        and search the chosen source; the hits and the decision."""
        from pydantic import ValidationError

        from routerag.integrations.routed import route_and_search

        if not query.strip():
            raise McpRequestError("the query is empty")
        try:  # a request names registered routers (or allowed plugins) and shipped router models, never paths
            named = RouteRequest.model_validate({"router": router, "router_model": router_model},
                                                context=self.settings.security.from_request(None).context())
        except ValidationError as exc:
            raise McpRequestError("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg'].removeprefix('Value error, ')}"
                                            for e in exc.errors())) from None
        return route_and_search(self._router(named), self.sources, query, k)

    def _router(self, named: RouteRequest) -> Router:
        from routerag.routing import RouterDeps, build_router

        name = named.router or self.settings.router
        model = named.router_model or self.settings.router_model
        with self._routers_lock:
            if (name, model) not in self.routers:
                self.routers[name, model] = build_router(name, RouterDeps(model=model, rules=self.rules))
            return self.routers[name, model]

    def list_sources(self) -> SourcesResult:
        infos = [McpSourceInfo(name=name, mode=self.sources.get(name).mode, profile=self.sources.get(name).profile)
                 for name in self.sources.names()]
        return SourcesResult(sources=infos, default=self.default_source, documents=self.documents,
                             index=str(self.index_dir))

    def ask(self, question: str, strategy: str = DEFAULT_STRATEGY, params: dict[str, Any] | None = None, *,
            cancelled: threading.Event | None = None) -> AskResult:
        """Answer ``question`` as the service's ``/v1/ask`` does; once ``cancelled`` is set the run
        stops at its next model call or search. A refusal (the question, the strategy or its params)
        is a :class:`~routerag.errors.RouteragError`: the tool's error result."""
        from routerag.edge.asks import Ask, StrategyConfig

        self.answerer.check_question(question)
        prepared = self.answerer.preparation(StrategyConfig(strategy=strategy, params=dict(params or {})))
        trace = self.answerer.answer(Ask(prepared, question), cancelled or threading.Event())
        return ask_result(trace, self._model_label(prepared.strategy))

    def _model_label(self, strategy: PreparedStrategy) -> str:
        """The model that answered ``strategy``, with its policy adapter, if any."""
        name = strategy.model.resolved().model if strategy.model is not None else None
        name = name or self.answerer.model_for(strategy).name
        return f"{name} + {strategy.adapter}" if strategy.adapter else name
