"""Running an ASGI app with uvicorn: in the foreground (the CLI) or in a background thread on
a pre-bound loopback socket (tests, benchmarks, notebooks). Both apply the connection limits of
:mod:`routerag.edge.connections` (header timeout and size, keep-alive timeout)."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn
from starlette.types import ASGIApp

from routerag.edge.connections import uvicorn_config, uvicorn_options
from routerag.edge.settings import SecuritySettings


def bind_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening TCP socket; ``port=0`` picks a free one (no race between choosing and binding).

    ``TCP_NODELAY`` is set here, and accepted connections inherit it: uvicorn serving a socket it
    did not bind leaves Nagle's algorithm on, and then every reply on a keep-alive connection
    (headers and body are two writes) waited ~40 ms for the client's delayed ACK."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


class BackgroundServer:
    """``with BackgroundServer(app) as server: httpx.get(server.url + "/health")``"""

    def __init__(self, app: ASGIApp, host: str = "127.0.0.1", port: int = 0, *, log_level: str = "warning",
                 security: SecuritySettings | None = None) -> None:
        self._socket = bind_socket(host, port)
        self.host = host
        self.port: int = self._socket.getsockname()[1]
        config = uvicorn_config(app, security or SecuritySettings(), log_level=log_level, access_log=False, lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                        name=f"uvicorn:{self.port}", daemon=True)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout_s: float = 20.0) -> "BackgroundServer":
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the server thread exited during start-up")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the server did not start within {timeout_s} s")
            time.sleep(0.01)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        self._socket.close()

    def __enter__(self) -> "BackgroundServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(app: ASGIApp, host: str, port: int, *, log_level: str = "info", security: SecuritySettings | None = None) -> None:
    """Serve in the foreground until interrupted, with the connection limits of ``security``."""
    uvicorn.run(app, host=host, port=port, log_level=log_level, **uvicorn_options(security or SecuritySettings()))
