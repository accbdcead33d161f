"""The HTTP status of routerag's own refusals on the service's native routes, in one table: a
:class:`~routerag.errors.RouteragError` kind raised below the edge (preparing a strategy, building
it, a run asked for) answers ``{"detail": "<its message>"}`` with its status here. The OpenAI
routes answer the same kinds in OpenAI's shape (:mod:`routerag.server.openai_errors`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from routerag.errors import RouteragError
from routerag.server.refusals import RequestRefused
from routerag.server.run_records import RunNotResumableError, UnknownRunError
from routerag.server.run_space import RunStoreFullError, RunStoreUnreadableError
from routerag.strategies.prepare import StrategyRequestError
from routerag.strategies.resolve import StrategyParamsError

__all__ = ["NATIVE_STATUS", "by_kind", "install_domain_errors"]

V = TypeVar("V")

NATIVE_STATUS: dict[type[RouteragError], int] = {
    RequestRefused: 422,  # over one of the service's limits: an empty or too long question, too many questions
    StrategyRequestError: 422,  # the request's strategy, params or the sources they name
    StrategyParamsError: 422,  # found while building a strategy a strategy runs (adaptive's choices)
    UnknownRunError: 404,
    RunNotResumableError: 409,
    RunStoreFullError: 507,  # a new run refused: too little free space, or its files cannot be written
    RunStoreUnreadableError: 503,  # a stored run's files cannot be read back
}


def by_kind(exc: BaseException, table: Mapping[type[RouteragError], V]) -> V | None:
    """What ``table`` gives ``exc``'s kind (its most specific class listed), or None."""
    return next((table[cls] for cls in type(exc).__mro__ if cls in table), None)


def install_domain_errors(app: FastAPI) -> None:
    """Answer each kind of :data:`NATIVE_STATUS` with its status and message."""

    async def refused(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=by_kind(exc, NATIVE_STATUS) or 500)

    for kind in NATIVE_STATUS:
        app.add_exception_handler(kind, refused)
