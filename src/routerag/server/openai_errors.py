"""OpenAI's error shape, ``{"error": {"message", "type", "param", "code"}}``, on every OpenAI route
(``/v1/models``, ``/v1/models/{model}``, ``/v1/chat/completions``, streamed or not), so that the SDK
raises its typed errors (``AuthenticationError``, ``BadRequestError``, ``RateLimitError``, ...).

Every refusal is mapped here, in one place:

* :func:`openai_error` turns what a route raises (a bad body, an :class:`ApiError`, routerag's own
  refusals by their kind in the service's one table, :data:`~routerag.server.domain_errors.DOMAIN_ERRORS`
  — a refused conversation, a refused strategy request, bad params, a refused upload —, an
  admission bound) into a status and an :class:`OpenAIError`;
  :class:`OpenAIRoute` answers with it, and a stream that has already answered 200 sends it as an
  event (:func:`error_event`);
* :func:`refusal_body` gives the front door's own refusals (wrong API key, Host or Origin, a body
  over the limit, JSON too deep) this shape on the OpenAI paths (:func:`is_openai_path`) and the
  service's ``{"detail": ...}`` elsewhere;
* :func:`run_failure` gives the status of a run whose trace records an error, by its ``error_kind``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel

from routerag.edge.admission import OVER_BOUND_STATUS, OverBound
from routerag.server.domain_errors import reply_for
from routerag.server.errors import ApiError, validation_detail
from routerag.trace import RunErrorKind, Trace

log = logging.getLogger(__name__)

__all__ = ["OPENAI_ERRORS", "ChatRequestError", "ErrorChunk", "OpenAIError", "OpenAIErrorReply", "OpenAIRoute",
           "error_body", "error_event", "error_reply", "failed_run_reply", "is_openai_path", "openai_error", "refusal",
           "refusal_body", "run_failure"]

OPENAI_PATHS = ("/v1/chat/completions", "/v1/models")


class OpenAIError(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class OpenAIErrorReply(BaseModel):
    error: OpenAIError


class ErrorChunk(BaseModel):
    """A stream's failure: OpenAI's error object (the SDK raises it), with the run's trace."""

    error: OpenAIError
    routerag: Trace | None = None


class ChatRequestError(ApiError):
    """A refused request, with the field it is about and OpenAI's error code."""

    def __init__(self, status: int, detail: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(status, detail)
        self.param = param
        self.code = code


OPENAI_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": OpenAIErrorReply, "description": "the body is not valid JSON, or messages the endpoint does not answer"},
    401: {"model": OpenAIErrorReply, "description": "missing or wrong API key"},
    404: {"model": OpenAIErrorReply, "description": "no such model (GET /v1/models)"},
    422: {"model": OpenAIErrorReply, "description": "an invalid request, or a run that asked for a source this service cannot serve"},
    429: {"model": OpenAIErrorReply, "description": "too many asks queued (`Retry-After` says when to retry)"},
    500: {"model": OpenAIErrorReply, "description": "the run failed (the trace is under `routerag`)"},
    502: {"model": OpenAIErrorReply, "description": "the model or a remote source failed (the trace is under `routerag`)"},
}

_CODES = {401: "invalid_api_key", 413: "request_too_large", 429: "rate_limit_exceeded"}


def refusal(status: int, message: str, *, param: str | None = None, code: str | None = None) -> OpenAIError:
    """The OpenAI error of a refusal with ``status``: its type and (by default) code follow the status."""
    kind = ("authentication_error" if status == 401 else "requests" if status == 429
            else "invalid_request_error" if status < 500 else "server_error")
    return OpenAIError(message=message, type=kind, param=param, code=code or _CODES.get(status))


def error_body(status: int, message: str, *, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    """``{"error": {...}}`` for a refusal with ``status``."""
    return OpenAIErrorReply(error=refusal(status, message, param=param, code=code)).model_dump()


def error_reply(status: int, message: str, *, code: str | None = None, param: str | None = None,
                headers: dict[str, str] | None = None) -> JSONResponse:
    """A refused request in OpenAI's shape."""
    return JSONResponse(error_body(status, message, code=code, param=param), status_code=status, headers=headers)


def openai_error(exc: Exception) -> tuple[int, OpenAIError, dict[str, str] | None] | None:
    """The status, OpenAI error and headers of what an OpenAI route raised; None for an
    exception that is not a refusal (a bug: answered 500)."""
    status: int
    param: str | None = None
    code: str | None = None
    headers: dict[str, str] | None = None
    if isinstance(exc, RequestValidationError):
        status, message, errors = validation_detail(exc)
        if errors:
            param = ".".join(p for p in errors[0]["loc"] if p != "body") or None
    elif isinstance(exc, ApiError):
        status, message, headers = exc.status, exc.detail, exc.headers
        param, code = getattr(exc, "param", None), getattr(exc, "code", None)
    elif isinstance(exc, OverBound):  # the service's admission of asks (the message names the bound)
        status, message, headers = OVER_BOUND_STATUS, str(exc), exc.headers()
    elif (row := reply_for(exc, "openai")) is not None:
        status, param, code, message = row.status, row.param, row.code, str(exc)
    else:
        return None
    return status, refusal(status, message, param=param, code=code), headers


def error_event(exc: Exception) -> str:
    """A stream's ``data: {"error": ...}`` event for what its run raised."""
    mapped = openai_error(exc)
    if mapped is None:
        log.error("the streamed chat completion failed", exc_info=exc)
        error = refusal(500, f"internal error while answering ({type(exc).__name__})")
    else:
        error = mapped[1]
    return f"data: {ErrorChunk(error=error).model_dump_json(exclude_none=True)}\n\n"


class OpenAIRoute(APIRoute):
    """A route whose every refusal (bad body, unknown model, wrong key, bad params, a bound) is in OpenAI's shape."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:  # noqa: BLE001 — every refusal and every bug answers in OpenAI's shape
                mapped = openai_error(exc)
                if mapped is None:
                    log.error("internal error in %s %s", request.method, request.url.path, exc_info=exc)
                    return error_reply(500, f"internal error in {request.method} {request.url.path} ({type(exc).__name__})")
                status, error, headers = mapped
                return JSONResponse(OpenAIErrorReply(error=error).model_dump(), status_code=status, headers=headers)

        return handle


def is_openai_path(path: str) -> bool:
    """``/v1/chat/completions``, ``/v1/models`` and ``/v1/models/{model}``."""
    path = path.rstrip("/")
    return path in OPENAI_PATHS or path.startswith("/v1/models/")


def refusal_body(path: str, status: int, detail: str) -> dict[str, Any]:
    """The body of a front-door refusal: OpenAI's shape on the OpenAI paths, ``{"detail"}`` elsewhere."""
    return error_body(status, detail) if is_openai_path(path) else {"detail": detail}


_FAILURE_REPLIES: dict[RunErrorKind, tuple[int, str]] = {
    "retrieval": (422, "invalid_request_error"),  # a source this service cannot serve
    "model": (502, "upstream_error"),
    "remote_source": (502, "upstream_error"),
}


def run_failure(trace: Trace) -> tuple[int, OpenAIError]:
    """The HTTP status and OpenAI error of a run whose trace records an error, by its
    ``error_kind``: 422 for a source this service cannot serve, 502 for a failed model or remote
    source, 500 for anything else (a trace without a kind included)."""
    status, kind = _FAILURE_REPLIES.get(trace.error_kind or "other", (500, "server_error"))
    return status, OpenAIError(message=f"the {trace.strategy} run failed: {trace.error}", type=kind, code="run_failed")


def failed_run_reply(trace: Trace) -> JSONResponse:
    status, error = run_failure(trace)
    headers = {"x-should-retry": "false"} if status == 500 else None  # the same run would fail the same way
    return JSONResponse({"error": error.model_dump(), "routerag": trace.model_dump(mode="json")},
                        status_code=status, headers=headers)
