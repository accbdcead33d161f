"""Connection-level limits of the HTTP servers, for uvicorn: how long a client may take to send a
request's headers, how many bytes they may take, how long an idle keep-alive connection stays.

uvicorn (0.54) closes an idle keep-alive connection after ``timeout_keep_alive``, but only once a
response has been sent: a connection that sends nothing, or part of its headers, is kept open for
ever (and ``httptools``, the parser uvicorn picks when installed, has no bound on header size;
``h11_max_incomplete_event_size`` applies to h11 only). So the servers run uvicorn's own HTTP
protocol class with two additions (:func:`guarded_protocol`):

* a header timer, armed when the connection opens and when the first bytes of a next request
  arrive: when it fires and no request has started since (its headers are incomplete), the
  connection is closed;
* a byte count of what arrived while the headers are incomplete: past the limit the client gets
  ``431`` and the connection is closed.

The body has its own time limit in the front door (``security.body_timeout_s``, 408).
"""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from routerag.edge.settings import SecuritySettings

_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
              b"connection: close\r\ncontent-length: 31\r\n\r\nrequest headers are too large\r\n")


def guarded_protocol(base: type[asyncio.Protocol], header_timeout_s: float, max_header_bytes: int) -> type[asyncio.Protocol]:
    """``base`` (uvicorn's h11 or httptools protocol) that closes a connection whose request
    headers take longer than ``header_timeout_s`` or more than ``max_header_bytes``."""

    class GuardedProtocol(base):  # type: ignore[valid-type,misc]
        _header_timer: asyncio.TimerHandle | None = None
        _waiting_on: object = None  # the request cycle that was current when the timer was armed
        _header_bytes = 0

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            self._arm()  # a connection that never sends a byte is closed too

        def data_received(self, data: bytes) -> None:
            if self._header_timer is None and self._between_requests():
                self._arm()
            super().data_received(data)
            if self._header_timer is None:
                return
            if self._cycle() is not self._waiting_on:  # the headers are complete: a request started
                self._disarm()
                return
            self._header_bytes += len(data)
            if self._header_bytes > max_header_bytes and not self._transport().is_closing():
                self._disarm()
                self._transport().write(_TOO_LARGE)
                self._transport().close()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _cycle(self) -> object:
            return getattr(self, "cycle", None)

        def _transport(self) -> asyncio.Transport:
            return self.transport  # type: ignore[no-any-return]

        def _between_requests(self) -> bool:
            cycle = self._cycle()
            return cycle is None or bool(getattr(cycle, "response_complete", False))

        def _arm(self) -> None:
            loop = asyncio.get_running_loop()
            self._waiting_on, self._header_bytes = self._cycle(), 0
            self._header_timer = loop.call_later(header_timeout_s, self._headers_late)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            transport = self._transport()
            if transport.is_closing() or transport.get_protocol() is not self:  # closed, or upgraded (websocket)
                return
            if self._cycle() is self._waiting_on:  # no request started: its headers never completed
                transport.close()

    GuardedProtocol.__name__ = GuardedProtocol.__qualname__ = f"Guarded{base.__name__}"
    return GuardedProtocol


def base_protocol() -> type[asyncio.Protocol]:
    """The protocol class uvicorn's ``http="auto"`` picks: httptools when installed, else h11."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    return AutoHTTPProtocol


def uvicorn_options(security: SecuritySettings) -> dict[str, Any]:
    """``uvicorn.Config``/``uvicorn.run`` keyword arguments for the connection limits of ``security``."""
    return {
        "http": guarded_protocol(base_protocol(), security.header_timeout_s, security.max_header_bytes),
        "timeout_keep_alive": security.keep_alive_timeout_s,
        "h11_max_incomplete_event_size": security.max_header_bytes,
    }


def uvicorn_config(app: ASGIApp, security: SecuritySettings, **options: Any) -> uvicorn.Config:
    return uvicorn.Config(app, **uvicorn_options(security), **options)
