"""Admission control: bounds on the work a service has accepted and not yet finished.

An :class:`Admission` counts units of work (one ask; one answer of a background run) per service
and per client identity. :meth:`Admission.admit` either counts them and returns a
:class:`Ticket`, or raises :class:`OverBound` — answered 429 with ``Retry-After`` and a JSON
body naming the bound (:func:`install_admission_handler`). A ticket gives its units back with
:meth:`Ticket.release` (idempotent, thread-safe: a background run gives back one answer at a
time from its worker thread).

An ask route takes a ticket with the dependency :func:`routerag.server.deps.admit_ask`; the reply
gives it back where the ask ends (``routerag.server.admitted``): a streamed reply when its body has
been sent, has failed or its client disconnected, a non-streamed one once its run is over, the
dependency only when the route ended without a streamed reply. This does not depend on when a
FastAPI version exits a ``yield`` dependency. The ask routes and the chat endpoint share one
admission (the service's ``asks``).

A client's identity is a hash of the API key it presented (the key itself is never kept); with
no key configured every client is the same anonymous one and only the service bound applies.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, SecretStr
from starlette.datastructures import Headers

from routerag.edge.guard import presented_key
from routerag.edge.settings import AdmissionSettings
from routerag.errors import RouteragError

__all__ = ["OVER_BOUND", "OVER_BOUND_STATUS", "Admission", "AdmissionState", "OverBound", "OverBoundReply", "Ticket",
           "ask_admission", "client_identity", "install_admission_handler", "over_bound_reply"]


OVER_BOUND_STATUS = 429
"""The HTTP status of :class:`OverBound` on every route (native and OpenAI-compatible alike)."""


class OverBound(RouteragError):
    """Admitting the work would pass a bound: answered 429 with ``Retry-After``."""

    def __init__(self, bound: str, limit: int, in_use: int, asked: int, retry_after_s: int) -> None:
        self.bound, self.limit, self.in_use, self.asked, self.retry_after_s = bound, limit, in_use, asked, retry_after_s
        super().__init__(f"too much work queued: {in_use} of the bound {bound}={limit} in use, "
                         f"{asked} more asked; retry after {retry_after_s} s")

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_s)}


class OverBoundReply(BaseModel):
    """The body of a 429."""

    detail: str
    bound: str = Field(description="the bound reached: asks, asks_per_key, run_answers or run_answers_per_key")
    limit: int
    in_use: int = Field(description="units of that bound in use when the request came")


class AdmissionState(BaseModel):
    """What one admission holds now (``/ready``)."""

    name: str
    in_use: int = Field(description="units admitted and not yet released")
    limit: int
    per_key_limit: int | None
    saturated: bool = Field(description="in_use has reached the limit: new work gets 429")


def client_identity(headers: Headers, api_key: SecretStr | None) -> str | None:
    """``key:<sha256 prefix>`` of the API key the request presented when a key is configured (the
    guard has already checked it); ``None`` (anonymous) otherwise."""
    if api_key is None:
        return None
    key = presented_key(headers)
    if key is None:
        return None
    return "key:" + hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:16]


class Ticket:
    """Units admitted to one piece of work; :meth:`release` gives them back."""

    def __init__(self, admission: Admission, identity: str | None, units: int) -> None:
        self._admission = admission
        self.identity = identity
        self.held = units

    def release(self, units: int | None = None) -> None:
        """Give back ``units`` (all still held when None); more than held gives back what is held."""
        self._admission._give_back(self, units)


class Admission:
    """``limit`` units at once across clients, ``per_key`` per client identity (None: no per-key bound)."""

    def __init__(self, name: str, limit: int, per_key: int | None = None, retry_after_s: int = 1) -> None:
        self.name = name
        self.limit = limit
        self.per_key = per_key
        self.retry_after_s = retry_after_s
        self._lock = threading.Lock()  # held only to count: never across work
        self._in_use = 0
        self._by_identity: dict[str, int] = {}

    def fits(self, units: int) -> str | None:
        """Why ``units`` can never be admitted (more than a bound itself), or None."""
        if units > self.limit:
            return f"{units} units of work; the bound {self.name} is {self.limit}"
        if self.per_key is not None and units > self.per_key:
            return f"{units} units of work; the bound {self.name}_per_key is {self.per_key}"
        return None

    def admit(self, identity: str | None = None, units: int = 1) -> Ticket:
        with self._lock:
            if self._in_use + units > self.limit:
                raise OverBound(self.name, self.limit, self._in_use, units, self.retry_after_s)
            if identity is not None and self.per_key is not None:
                mine = self._by_identity.get(identity, 0)
                if mine + units > self.per_key:
                    raise OverBound(f"{self.name}_per_key", self.per_key, mine, units, self.retry_after_s)
                self._by_identity[identity] = mine + units
            self._in_use += units
        return Ticket(self, identity, units)

    def _give_back(self, ticket: Ticket, units: int | None) -> None:
        with self._lock:
            n = ticket.held if units is None else max(0, min(units, ticket.held))
            if n == 0:
                return
            ticket.held -= n
            self._in_use -= n
            if ticket.identity is not None and ticket.identity in self._by_identity:
                left = self._by_identity[ticket.identity] - n
                if left > 0:
                    self._by_identity[ticket.identity] = left
                else:
                    del self._by_identity[ticket.identity]

    def in_use(self, identity: str | None = None) -> int:
        with self._lock:
            return self._in_use if identity is None else self._by_identity.get(identity, 0)

    def state(self) -> AdmissionState:
        with self._lock:
            in_use = self._in_use
        return AdmissionState(name=self.name, in_use=in_use, limit=self.limit, per_key_limit=self.per_key,
                              saturated=in_use >= self.limit)


def ask_admission(bounds: AdmissionSettings) -> Admission:
    """The admission of asks under ``bounds`` (``max_asks``, ``max_asks_per_key``): the service's ask
    routes and chat endpoint share one, the MCP server's ``ask`` tool has its own."""
    return Admission("asks", bounds.max_asks, bounds.max_asks_per_key, bounds.retry_after_s)


def install_admission_handler(app: FastAPI) -> None:
    """:class:`OverBound` -> 429 ``{"detail", "bound", "limit", "in_use"}`` with ``Retry-After``."""

    @app.exception_handler(OverBound)
    async def _over(_: Request, exc: OverBound) -> JSONResponse:
        return over_bound_reply(exc)


def over_bound_reply(exc: OverBound) -> JSONResponse:
    """429 ``{"detail", "bound", "limit", "in_use"}`` with ``Retry-After``."""
    body = OverBoundReply(detail=str(exc), bound=exc.bound, limit=exc.limit, in_use=exc.in_use)
    return JSONResponse(body.model_dump(), status_code=OVER_BOUND_STATUS, headers=exc.headers())


OVER_BOUND: dict[int | str, dict[str, Any]] = {
    OVER_BOUND_STATUS: {"model": OverBoundReply, "description": "too much work is queued (a bound of `admission`); the body names the bound, "
                         "`Retry-After` says when to try again"},
}
