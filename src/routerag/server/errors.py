"""The HTTP error type of routerag's apps and its OpenAPI description (shared by the retrieval
app, the Search-R1 adapter, the service and the sources API)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class ErrorReply(BaseModel):
    detail: str


class ApiError(Exception):
    """An error with an HTTP status and a human-readable reason."""

    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorReply, "description": "the body is not valid JSON"},
    401: {"model": ErrorReply, "description": "missing or wrong API key"},
    413: {"model": ErrorReply, "description": "the body is larger than the server's limit"},
    422: {"model": ErrorReply, "description": "a limit is exceeded, a query is empty, or a source is unknown"},
}
