"""The MCP server over stdio, answering every request.

The SDK's stdio transport parses each line strictly (``pydantic_core``: a lone surrogate such
as ``"\\ud800"`` is not JSON text there) and drops a line it cannot parse without a reply, so
the client waits for ever. Here such a line gets a JSON-RPC error: ``-32600`` (invalid request)
with the request's id when Python's lenient parser still finds one, else ``-32700`` (parse
error, id null). A line with no id (a notification) is never answered, as JSON-RPC says; it
is logged in one line.
"""

from __future__ import annotations

import json
import logging
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from routerag.integrations.mcp_errors import refusal_logger

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.shared.message import SessionMessage

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def _raw_line(exc: Exception) -> str | None:
    """The line a strict parse rejected (the SDK passes the ``ValidationError`` on, input included)."""
    if not isinstance(exc, ValidationError):
        return None
    errors = exc.errors(include_url=False)
    raw = errors[0].get("input") if errors else None
    return raw if isinstance(raw, str) else None


def _request_id(raw: str) -> tuple[bool, Any]:
    """``(is a request, its id)``: Python's parser accepts what JSON allows and ``pydantic_core`` refuses."""
    try:
        message = json.loads(raw)
    except ValueError:
        return True, None  # not JSON at all: answered with id null
    if not isinstance(message, dict) or "id" not in message:
        return not isinstance(message, dict), None  # a notification is never answered
    rid = message["id"]
    return True, rid if isinstance(rid, str | int) and not isinstance(rid, bool) else None


def malformed_reply(exc: Exception) -> dict[str, Any] | None:
    """The JSON-RPC error for a line the transport could not parse; None when none is owed."""
    raw = _raw_line(exc)
    if raw is None:
        return {"jsonrpc": "2.0", "id": None, "error": {"code": PARSE_ERROR, "message": f"unreadable message: {exc}"[:200]}}
    is_request, rid = _request_id(raw)
    if not is_request:
        return None
    reason = exc.errors(include_url=False)[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
    code = INVALID_REQUEST if rid is not None else PARSE_ERROR
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": f"malformed message: {reason}"}}


class AnsweringReadStream:
    """The transport's read stream, minus the lines it could not parse: each gets its error
    written to the client (through the transport's own writer), and is not passed on."""

    def __init__(self, inner: Any, write: Any, logger: logging.Logger) -> None:
        self.inner, self.write, self.logger = inner, write, logger

    @property
    def last_context(self) -> Any:
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        from mcp.shared.message import SessionMessage
        from mcp_types import JSONRPCError

        while True:
            item = await self.inner.receive()
            if not isinstance(item, Exception):
                return item  # type: ignore[no-any-return]
            reply = malformed_reply(item)
            self.logger.warning("stdio: a malformed message%s", " was answered with an error" if reply else " (no id) was dropped")
            if reply is not None:
                await self.write.send(SessionMessage(JSONRPCError.model_validate(reply)))

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __aiter__(self) -> AnsweringReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        import anyio

        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnsweringReadStream:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        await self.aclose()
        return None


async def serve_stdio(server: MCPServer) -> None:
    """What ``server.run("stdio")`` does, with :class:`AnsweringReadStream` in front of the server."""
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server  # the SDK's own run_stdio_async drives the same low-level server
    async with stdio_server() as (read, write):
        answering = AnsweringReadStream(read, write, refusal_logger())
        await lowlevel.run(answering, write, lowlevel.create_initialization_options())
