"""The HTTP status of routerag's own refusals, in one table for both API families of the service:
a :class:`~routerag.errors.RouteragError` kind raised below the edge (preparing a strategy,
building it, mounting an upload, a run asked for) has one row here, with its status, the families
that answer it and, on the OpenAI routes, the request field it is about (``param``).

* The native routes answer ``{"detail": "<its message>"}`` with its status (a refused upload adds
  its bad rows as ``errors``): :func:`install_domain_errors`, :func:`native_reply`.
* The OpenAI routes answer the same kinds in OpenAI's shape (:mod:`routerag.server.openai_errors`
  reads :func:`reply_for` with ``"openai"``).

An admission bound (:class:`~routerag.edge.admission.OverBound`, 429 with ``Retry-After``) is
answered by :mod:`routerag.edge.admission` on every route."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from routerag.edge.refusals import RequestRefused
from routerag.errors import RouteragError
from routerag.run.assemble import StrategyRequestError
from routerag.server.chat_messages import ConversationRefused
from routerag.server.chat_models import UnknownModelError
from routerag.server.report_store import ReportUnreadableError, UnknownReportError
from routerag.server.run_records import RunNotResumableError, UnknownRunError
from routerag.server.run_space import RunStoreFullError, RunStoreUnreadableError
from routerag.server.upload_parse import (
    UnknownUploadError,
    UnsupportedUploadError,
    UploadConflictError,
    UploadRejected,
    UploadTooLargeError,
)
from routerag.strategies.resolve import StrategyParamsError

__all__ = ["DOMAIN_ERRORS", "Family", "KindReply", "by_kind", "install_domain_errors", "native_reply", "reply_for"]

V = TypeVar("V")

Family = Literal["native", "openai"]
BOTH: tuple[Family, ...] = ("native", "openai")


@dataclass(frozen=True)
class KindReply:
    """How one kind of refusal is answered."""

    status: int
    families: tuple[Family, ...] = BOTH  # the API families whose routes raise it
    param: str | None = None  # the OpenAI routes: the request field the refusal is about
    code: str | None = None  # the OpenAI routes: OpenAI's error code (None: the status's)


_UPLOAD = "routerag.sources"  # the OpenAI routes: uploads are named by the routerag extension's sources

DOMAIN_ERRORS: dict[type[RouteragError], KindReply] = {
    RequestRefused: KindReply(422, ("native",)),  # over one of the service's limits: an empty or too long question, too many questions
    StrategyRequestError: KindReply(422, param="routerag"),  # the request's strategy, params or the sources they name
    StrategyParamsError: KindReply(422, param="routerag.params"),  # found while building a strategy a strategy runs
    UploadRejected: KindReply(422, param=_UPLOAD),  # a bad upload, or a request naming one that is not ready
    UnknownUploadError: KindReply(404, param=_UPLOAD),
    UploadConflictError: KindReply(409, param=_UPLOAD),
    UploadTooLargeError: KindReply(413, param=_UPLOAD),
    UnsupportedUploadError: KindReply(415, param=_UPLOAD),
    ConversationRefused: KindReply(400, ("openai",), param="messages"),  # messages the endpoint does not answer
    UnknownModelError: KindReply(404, ("openai",), param="model", code="model_not_found"),
    UnknownRunError: KindReply(404, ("native",)),
    RunNotResumableError: KindReply(409, ("native",)),
    RunStoreFullError: KindReply(507, ("native",)),  # a new run refused: too little free space, or its files cannot be written
    RunStoreUnreadableError: KindReply(503, ("native",)),  # a stored run's files cannot be read back
    UnknownReportError: KindReply(404, ("native",)),  # no routing report of that name (or no figure)
    ReportUnreadableError: KindReply(503, ("native",)),  # a stored routing report cannot be read
}


def by_kind(exc: BaseException, table: Mapping[type[RouteragError], V]) -> V | None:
    """What ``table`` gives ``exc``'s kind (its most specific class listed), or None."""
    return next((table[cls] for cls in type(exc).__mro__ if cls in table), None)


def reply_for(exc: BaseException, family: Family) -> KindReply | None:
    """The row of ``exc``'s kind when routes of ``family`` answer it, else None (a bug: 500)."""
    row = by_kind(exc, DOMAIN_ERRORS)
    return row if row is not None and family in row.families else None


def native_reply(exc: Exception) -> JSONResponse:
    """``{"detail": "<message>"}`` (and a refused upload's ``errors``) with the kind's status."""
    row = reply_for(exc, "native")
    body: dict[str, object] = {"detail": str(exc)}
    if isinstance(exc, UploadRejected) and exc.errors:
        body["errors"] = [e.model_dump() for e in exc.errors]
    return JSONResponse(body, status_code=row.status if row is not None else 500)


def install_domain_errors(app: FastAPI) -> None:
    """Answer each kind the native routes raise with its status and message."""

    async def refused(_: Request, exc: Exception) -> JSONResponse:
        return native_reply(exc)

    for kind, row in DOMAIN_ERRORS.items():
        if "native" in row.families:
            app.add_exception_handler(kind, refused)
