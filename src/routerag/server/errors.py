"""The HTTP error type of routerag's apps, its OpenAPI description and the reason of a refused body (shared by the retrieval
app, the Search-R1 adapter, the service and the sources API)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from routerag.errors import RouteragError

if TYPE_CHECKING:
    from fastapi.exceptions import RequestValidationError


class ErrorReply(BaseModel):
    detail: str


class ApiError(RouteragError):
    """An error with an HTTP status and a human-readable reason: raised by the routes in ``server/``
    only (code below the edge raises a :class:`~routerag.errors.RouteragError` kind, answered by
    :mod:`routerag.server.domain_errors`)."""

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


def validation_detail(exc: RequestValidationError) -> tuple[int, str, list[dict[str, Any]]]:
    """The status, one-line reason and per-field errors of a request FastAPI could not validate:
    400 "request body is not valid JSON" for a body that is not JSON, else 422 with each field's
    problem as ``"<field path>: <message>"`` joined by ``"; "``. Every app's refusal of a bad body
    (the retrieval API's ``{"detail", "errors"}``, the OpenAI-compatible endpoint's error) says this."""
    errors = [{"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
              for e in exc.errors()]
    if any(e["type"] == "json_invalid" for e in errors):
        return 400, "request body is not valid JSON", errors
    parts = []
    for e in errors:
        where = ".".join(p for p in e["loc"] if p != "body") or "body"
        parts.append(f"{where}: {e['msg']}")
    return 422, "; ".join(parts), errors
