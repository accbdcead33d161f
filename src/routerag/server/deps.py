"""The FastAPI dependencies of the service's routes: the :class:`~routerag.server.service.Service`
of the app (``app.state.service``), the API key check, and the admission of one ask. All are
``async``: answered on the event loop, they never wait for a worker thread."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import Depends, FastAPI, Request

from routerag.edge.admission import client_identity
from routerag.edge.guard import key_problem
from routerag.server.admitted import AdmittedAsk
from routerag.server.errors import ApiError
from routerag.server.service import Service

__all__ = ["admit_ask", "get_service", "install_service", "require_key"]


def install_service(app: FastAPI, service: Service) -> None:
    app.state.service = service


async def get_service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


async def require_key(request: Request, service: Service = Depends(get_service)) -> None:
    """Accepts ``X-API-Key: KEY`` or ``Authorization: Bearer KEY`` (or nothing, when no key is configured)."""
    problem = key_problem(request.headers, service.settings.api_key)
    if problem:
        raise ApiError(401, problem, {"WWW-Authenticate": "Bearer"})


async def admit_ask(request: Request, service: Service = Depends(get_service)) -> AsyncIterator[AdmittedAsk]:
    """One unit of the asks' admission (429 over a bound). The ask's reply gives it back where the
    ask ends (:mod:`routerag.server.admitted`); this gives it back when the route ended without a
    streamed reply, a refusal raised after the admission included."""
    admitted = AdmittedAsk(service.asks.admit(client_identity(request.headers, service.settings.api_key)))
    try:
        yield admitted
    finally:
        admitted.route_ended()
