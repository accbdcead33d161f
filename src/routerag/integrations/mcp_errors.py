"""What the MCP server says when it refuses: one readable sentence per refusal, one log line.

* A tool call whose arguments fail the tool's input schema is the tool's error result
  ``ask: question: field required; k: must be ≤ 50`` (:func:`readable_validation`): each field,
  what it must be; no pydantic type names, input echoes or documentation URLs.
* A request the server refuses (an unknown method, an unknown prompt or resource, bad params) is
  a JSON-RPC error and one line on stderr (:class:`OneLineRefusals`), not a traceback.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

LOGGER_NAME = "routerag.mcp"

_BOUNDS = {"greater_than_equal": ("ge", "≥"), "greater_than": ("gt", ">"),
           "less_than_equal": ("le", "≤"), "less_than": ("lt", "<")}
_TYPES = {"string_type": "a string", "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
          "float_type": "a number", "float_parsing": "a number", "bool_type": "true or false", "bool_parsing": "true or false",
          "dict_type": "an object", "list_type": "a list"}


def refusal_logger() -> logging.Logger:
    """``routerag.mcp``: one plain line per record on stderr (the SDK's handler wraps and boxes)."""
    logger = logging.getLogger(LOGGER_NAME)
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("routerag mcp: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


def _one_error(error: ErrorDetails) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind == "missing":
        return "field required"
    if kind in _BOUNDS:
        key, sign = _BOUNDS[kind]
        return f"must be {sign} {ctx.get(key)}"
    if kind == "string_too_short":
        return "must not be empty" if ctx.get("min_length") == 1 else f"must have at least {ctx.get('min_length')} characters"
    if kind == "string_too_long":
        return f"must have at most {ctx.get('max_length')} characters"
    if kind == "extra_forbidden":
        return "not an argument of this tool"
    if kind in _TYPES:
        return f"must be {_TYPES[kind]}"
    message = error["msg"].removeprefix("Value error, ")
    return message[:1].lower() + message[1:]


def readable_validation(tool: str, exc: ValidationError) -> str:
    """``tool: field: what it must be; other: ...`` — one sentence for the caller to correct."""
    parts = []
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in error["loc"])
        parts.append(f"{where}: {_one_error(error)}" if where else _one_error(error))
    return f"{tool}: {'; '.join(parts)}"


CallNext = Callable[[Any], Awaitable[Any]]


class OneLineRefusals:
    """Server middleware: a refused request logs one line (method, code, reason) and stays a
    JSON-RPC error; a ``ValueError`` a handler raises for a name it does not know (an unknown
    prompt or resource) becomes ``INVALID_PARAMS`` instead of a logged traceback."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.logger = logger or refusal_logger()

    async def __call__(self, ctx: Any, call_next: CallNext) -> Any:
        from mcp.shared.exceptions import MCPError
        from mcp_types import INVALID_PARAMS

        try:
            return await call_next(ctx)
        except MCPError as exc:
            self.logger.warning("%s refused (%s): %s", ctx.method, exc.error.code, _line(exc.error.message))
            raise
        except ValueError as exc:
            if isinstance(exc, ValidationError):
                raise  # the SDK answers INVALID_PARAMS for it, without pydantic text
            self.logger.warning("%s refused (%s): %s", ctx.method, INVALID_PARAMS, _line(str(exc)))
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None


def _line(text: str) -> str:
    return " ".join(text.split())[:500]
