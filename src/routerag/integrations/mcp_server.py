"""``routerag mcp INDEX``: routerag's retrieval and answering as Model Context Protocol tools, for
an agent (Claude Desktop, an IDE, an agent framework) that takes tools over MCP.

Four tools, with typed input and output schemas (:mod:`routerag.integrations.mcp_tools` does the
work): ``search`` (one mounted source's top hits), ``route`` (a routerag router chooses the source,
then its top hits, with the decision), ``ask`` (a routing strategy's answer and the searches it
made, with their hits), ``list_sources``. A refused call (an unknown source, router or strategy,
``k`` out of range, an empty question) is the tool's error result with the reason, never a
crash; arguments that fail a tool's schema are one sentence naming each field
(:mod:`~routerag.integrations.mcp_errors`).

``ask`` is admitted like the service's ``/v1/ask`` (``admission.max_asks``, per API key over HTTP;
beyond a bound it is refused at once), runs on worker threads of its own (``ask_threads``), and
stops at its next model call once its client cancels it or goes away
(:mod:`~routerag.integrations.mcp_asks`).

Transports: stdio (the client starts this command; stdout is the protocol's, everything else goes
to stderr) and streamable HTTP (``POST``/``GET`` at ``/mcp``) behind the front door of
``routerag serve`` (:class:`~routerag.edge.guard.RequestGuard`: Host and Origin checks, body
limits) and with its connection limits (header timeout and size, keep-alive timeout:
:mod:`routerag.edge.connections`), bound to loopback unless an API key is set; with a key every
request needs it. Over stdio a line that cannot be parsed is answered with a JSON-RPC error
(:mod:`~routerag.integrations.mcp_stdio`).

The MCP SDK (``pip install 'routerag[integrations]'``) is imported inside the functions here."""

# no `from __future__ import annotations`: the SDK reads the tools' annotations to build their schemas
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, ValidationError

from routerag.errors import RouteragError
from routerag.integrations.mcp_asks import AskGate
from routerag.integrations.mcp_errors import OneLineRefusals, readable_validation
from routerag.integrations.mcp_tools import (
    DEFAULT_K,
    DEFAULT_STRATEGY,
    AskResult,
    McpSettings,
    McpTools,
    SearchResult,
    SourcesResult,
)
from routerag.integrations.routed import RoutedSearch
from routerag.progress import Announce
from routerag.routing import ROUTERS, shipped_router_names
from routerag.sources.base import MAX_K, MAX_QUERY_CHARS

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from starlette.types import ASGIApp, Receive, Scope, Send

INSTALL_HINT = "pip install 'routerag[integrations]'"
SERVER_NAME = "routerag"
TOOLS = ("search", "route", "ask", "list_sources")


class McpUnavailableError(RouteragError, ImportError):
    """The MCP SDK is not installed."""


def _sdk() -> Any:
    try:
        import mcp.server.mcpserver as sdk
    except ImportError as exc:
        raise McpUnavailableError(f"`routerag mcp` needs the MCP SDK: {INSTALL_HINT} ({exc})") from None
    return sdk


def _instructions(tools: McpTools) -> str:
    return (f"routerag over the index {tools.index_dir.name} ({tools.documents} documents; sources: "
            f"{', '.join(tools.sources.names())}). Use `search` to read passages from one source (default "
            f"{tools.default_source}), `route` to have a router ({tools.settings.router}) choose the source first, `ask` to have a routing strategy search and answer a question itself "
            "(slower: a language model runs), `list_sources` to see what each source holds.")


def _server_class(sdk: Any) -> Any:
    """The SDK's server, with a tool's rejected arguments said in one sentence (:func:`readable_validation`)."""
    errors = sdk.exceptions

    class RouteragMCPServer(sdk.MCPServer):  # type: ignore[misc,name-defined]
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            try:
                return await super().call_tool(name, arguments, context)
            except errors.ToolError as exc:
                cause = exc.__cause__
                if isinstance(cause, ValidationError) and not isinstance(exc, errors.UnexpectedToolError):
                    raise errors.ToolError(readable_validation(name, cause)) from cause
                raise

    return RouteragMCPServer


def build_server(tools: McpTools) -> "MCPServer":
    """An MCP server with the four tools over ``tools`` (nothing is served yet)."""
    sdk = _sdk()
    from mcp.types import ToolAnnotations

    server = _server_class(sdk)(SERVER_NAME, instructions=_instructions(tools), log_level="WARNING",
                                middleware=[OneLineRefusals()])
    refused = sdk.exceptions.ToolError
    read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
    sources = ", ".join(tools.sources.names())
    routers = ", ".join(ROUTERS.names())
    router_models = ", ".join(shipped_router_names())

    def search(
        query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="what to search for")],
        source: Annotated[str | None, Field(description=f"the source (retrieval mode) to search: one of {sources}; "
                                                        f"default {tools.default_source}")] = None,
        k: Annotated[int, Field(ge=1, le=MAX_K, description="how many hits")] = DEFAULT_K,
    ) -> SearchResult:
        """Search one source of the index: the top-k passages (title, text, score) for a query.
        Fast, no language model. Use it to read evidence yourself; `list_sources` says what each source is."""
        try:
            return tools.search(query, source, k)
        except RouteragError as exc:
            raise refused(str(exc)) from None

    def route(
        query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="what to search for")],
        router: Annotated[str | None, Field(description=f"the router that chooses the source: one of {routers}; "
                                                        f"default {tools.settings.router}")] = None,
        k: Annotated[int, Field(ge=1, le=MAX_K, description="how many hits")] = DEFAULT_K,
        router_model: Annotated[str | None, Field(description="learned router: a shipped router model "
                                                              f"({router_models}); default: the configured one")] = None,
    ) -> RoutedSearch:
        """Route a query to the source a routerag router chooses, then search it there: the top-k
        passages (title, text, score, source) and the decision (the chosen source, the router's
        reason, its score of every source, best first). Fast: no language model runs."""
        try:
            return tools.route(query, router, k, router_model)
        except RouteragError as exc:
            raise refused(str(exc)) from None

    ask = _ask_tool(sdk, tools)

    def list_sources() -> SourcesResult:
        """The sources `search` can use: each one's name, retrieval mode and what it holds."""
        return tools.list_sources()

    server.add_tool(search, annotations=read_only)
    server.add_tool(route, annotations=read_only)
    server.add_tool(ask, annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    server.add_tool(list_sources, annotations=read_only)
    return server


def _ask_tool(sdk: Any, tools: McpTools) -> Callable[..., Any]:
    """The ``ask`` tool: admitted by :class:`AskGate`, stopped at its next model call once cancelled."""
    refused = sdk.exceptions.ToolError
    gate = AskGate(tools.settings.admission, tools.settings.ask_threads, tools.settings.api_key)

    async def ask(
        ctx: sdk.Context,  # type: ignore[name-defined]
        question: Annotated[str, Field(min_length=1, description="the question to answer")],
        strategy: Annotated[str, Field(description="a routing strategy: routerag (the learned policy picks passage, "
                                                   "graph or hybrid retrieval per search), vanilla (one search, then "
                                                   "answer), direct (no retrieval), adaptive, ...")] = DEFAULT_STRATEGY,
        params: Annotated[dict[str, Any] | None, Field(description="the strategy's parameters, e.g. "
                                                                   "{\"k\": 3, \"source\": \"bm25\"} for vanilla")] = None,
    ) -> AskResult:
        """Answer a question with a routing strategy over this index: it decides where and what to
        search, then answers. Returns the answer, each search it made (source, query, the hits with
        their passages and scores, why it searched there), token counts and latency. Slow (a local language model runs; the first call loads it)."""
        try:
            return await gate.run(lambda cancelled: tools.ask(question, strategy, params, cancelled=cancelled),
                                  ctx.headers)
        except RouteragError as exc:  # a refusal, an admission bound (OverBound) included
            raise refused(str(exc)) from None

    return ask


class _KeyRequired:
    """Every request (GET streams and DELETEs too, not only POSTs) needs the API key."""

    def __init__(self, app: "ASGIApp", settings: McpSettings) -> None:
        self.app = app
        self.api_key = settings.api_key

    async def __call__(self, scope: "Scope", receive: "Receive", send: "Send") -> None:
        from starlette.datastructures import Headers
        from starlette.responses import JSONResponse

        from routerag.edge.guard import key_problem

        problem = key_problem(Headers(scope=scope), self.api_key) if scope["type"] == "http" else None
        if problem:
            await JSONResponse({"detail": problem}, status_code=401, headers={"WWW-Authenticate": "Bearer"})(
                scope, receive, send)
            return
        await self.app(scope, receive, send)


def http_app(server: "MCPServer", settings: McpSettings) -> "ASGIApp":
    """The streamable-HTTP app at ``settings.path`` behind routerag's front door."""
    from routerag.edge.guard import RequestGuard

    app = server.streamable_http_app(streamable_http_path=settings.path, host=settings.host)
    guarded: ASGIApp = RequestGuard(app, bind_host=settings.host, api_key=settings.api_key,
                                    max_body_bytes=settings.max_body_bytes, security=settings.security)
    return _KeyRequired(guarded, settings) if settings.api_key is not None else guarded


def serve_mcp(index_dir: Path, settings: McpSettings, modes: list[str] | None = None, *,
              announce: Announce = lambda _: None) -> None:
    """Mount the index, then serve the tools over ``settings.transport`` until the client leaves
    (stdio) or until interrupted (http)."""
    _sdk()  # a missing SDK is refused before the index loads
    tools = McpTools.open(index_dir, settings, modes, announce=announce)
    server = build_server(tools)
    what = f"{', '.join(tools.sources.names())} of {index_dir} ({tools.documents} documents)"
    if settings.transport == "stdio":
        announce(f"serving MCP tools {', '.join(TOOLS)} over {what} on stdio")
        import anyio

        from routerag.integrations.mcp_stdio import serve_stdio

        anyio.run(serve_stdio, server)
        return
    _serve_http(http_app(server, settings), settings, what, announce)


def _serve_http(app: "ASGIApp", settings: McpSettings, what: str, announce: Announce) -> None:
    import uvicorn

    from routerag.edge.connections import uvicorn_config
    from routerag.edge.serving import bind_socket

    sock = bind_socket(settings.host, settings.port)  # port 0: the free port it got is announced
    port = sock.getsockname()[1]
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    announce(f"serving MCP tools {', '.join(TOOLS)} over {what} at http://{host}:{port}{settings.path} "
             f"(streamable HTTP{', API key required' if settings.api_key else ''})")
    try:
        # the connection limits of `routerag serve`: header timeout and size, keep-alive timeout
        uvicorn.Server(uvicorn_config(app, settings.security, log_level="warning", lifespan="on")).run(sockets=[sock])
    finally:
        sock.close()
