"""The front door of both servers: one ASGI middleware that checks a request before any route
sees it, in this order (each refusal is ``{"detail": reason}``, or the body ``refusal_body(path,
status, reason)`` gives: the service answers its OpenAI routes in OpenAI's error shape):

1. ``Host`` must be one of the allowed host names (400) — a DNS-rebinding page reaches a loopback
   server under its own host name, so it is refused here.
2. A state-changing request (POST/PUT/PATCH/DELETE) from a browser page on another origin is
   refused (403): ``Sec-Fetch-Site`` must be ``same-origin`` or ``none`` when sent, and ``Origin``
   must be this server's origin (or a configured one) when sent. Non-browser clients send neither.
3. When an API key is set, a state-changing request without the right key gets 401 before its
   body is read.
4. The body is read with a size limit (413) and a time limit (408).
5. A JSON body is parsed once here: nesting deeper than the limit, integers too long to convert
   and strings holding lone surrogates (``"\\ud800"``: valid JSON, not encodable as UTF-8) get
   422. Everything behind this middleware can rely on well-formed, UTF-8-encodable text.

Mounted apps (the retrieval API under ``/retrieval``) have their own guard; a request checked by
an outer guard is not checked again.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Callable
from typing import Any

import anyio
from pydantic import SecretStr
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from routerag.edge.settings import SecuritySettings
from routerag.errors import RouteragError

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
_GUARDED = "routerag.guarded"
_SURROGATE = re.compile("[\ud800-\udfff]")
_WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})


def host_name(value: str) -> str:
    """``"[::1]:8700"`` -> ``"::1"``, ``"LocalHost.:80"`` -> ``"localhost"``."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


def allowed_host_names(bind_host: str, configured: list[str] | None) -> frozenset[str] | None:
    """The ``Host`` names a server answers to; ``None`` means any. Configured names win; by default
    the bound host and the loopback names. A wildcard bind (0.0.0.0, ::) answers to any name
    unless names are configured: such a server needs an API key, which a rebinding page lacks."""
    if configured is not None:
        names = {host_name(h) for h in configured}
        return None if "*" in names else frozenset(names)
    if bind_host in _WILDCARD_BINDS:
        return None
    return frozenset({"localhost", "127.0.0.1", "::1", host_name(bind_host)})


def presented_key(headers: Headers) -> str | None:
    """The API key a request presents (``X-API-Key: KEY`` or ``Authorization: Bearer KEY``), if any."""
    given = headers.get("x-api-key")
    if given is None:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token:
            given = token.strip()
    return given


def key_problem(headers: Headers, expected: SecretStr | None) -> str | None:
    """Why the request's API key is missing or wrong (``X-API-Key: KEY`` or ``Authorization:
    Bearer KEY``); ``None`` when it is right or no key is configured."""
    if expected is None:
        return None
    given = presented_key(headers)
    if given is None:
        return "an API key is required: send `X-API-Key: KEY` or `Authorization: Bearer KEY`"
    if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.get_secret_value().encode()):
        return "the API key is not valid"
    return None


def cross_site_problem(headers: Headers, allowed_origins: frozenset[str]) -> str | None:
    """Why a state-changing request looks like it came from a page on another origin."""
    site = headers.get("sec-fetch-site")
    origin = headers.get("origin")
    if origin is not None:
        if origin.rstrip("/").lower() in allowed_origins:
            return None
        scheme, _, rest = origin.partition("://")
        if origin == "null" or not rest or host_name(rest) != host_name(headers.get("host", "")) \
                or _port(rest, scheme) != _port(headers.get("host", ""), scheme):
            return f"cross-origin request refused (Origin: {origin[:100]})"
    if site is not None and site not in ("same-origin", "none"):
        return f"cross-site request refused (Sec-Fetch-Site: {site[:40]})"
    return None


def _port(netloc: str, scheme: str) -> str:
    netloc = netloc.strip().lower()
    tail = netloc.rsplit("]", 1)[-1] if netloc.startswith("[") else netloc
    if ":" in tail and tail.count(":") == 1:
        return tail.rsplit(":", 1)[1]
    return "443" if scheme.lower() == "https" else "80"


class JsonProblem(RouteragError, ValueError):
    """A JSON body that parses but cannot be used."""


def check_json(value: Any, max_depth: int) -> None:
    """Walks a parsed JSON value without recursion: depth and lone surrogates (keys included)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            raise JsonProblem(f"JSON nested more than {max_depth} levels deep")
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise JsonProblem("a string holds a lone surrogate (such as \\ud800), which is not valid Unicode text")
        elif isinstance(item, dict):
            for key, sub in item.items():
                if _SURROGATE.search(key):
                    raise JsonProblem("a key holds a lone surrogate (such as \\ud800), which is not valid Unicode text")
                stack.append((sub, depth + 1))
        elif isinstance(item, list):
            stack.extend((sub, depth + 1) for sub in item)


def parse_json_strictly(body: bytes, max_depth: int) -> Any:
    """``json.loads`` that turns deep nesting and over-long integers into :class:`JsonProblem`
    (they raise ``RecursionError``/``ValueError`` in the standard parser) and checks the result."""
    try:
        value = json.loads(body)
    except RecursionError:
        raise JsonProblem(f"JSON nested more than {max_depth} levels deep") from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # int too long to convert, or bad encoding
        raise JsonProblem(f"JSON value cannot be read: {exc}") from None
    check_json(value, max_depth)
    return value


def _is_json(headers: Headers) -> bool:
    media = headers.get("content-type", "").split(";")[0].strip().lower()
    return media in ("", "application/json") or media.endswith("+json")


class RequestGuard:
    """See the module docstring. ``body_limit(path)`` gives the body limit for a path (uploads
    get a larger one); ``refusal_body(path, status, reason)`` the body of a refusal (by default
    ``{"detail": reason}``)."""

    def __init__(self, app: ASGIApp, *, bind_host: str, api_key: SecretStr | None, max_body_bytes: int,
                 security: SecuritySettings, body_limit: Callable[[str], int] | None = None,
                 refusal_body: Callable[[str, int, str], dict[str, Any]] | None = None) -> None:
        self.app = app
        self.refusal_body = refusal_body or (lambda _path, _status, detail: {"detail": detail})
        self.api_key = api_key
        self.security = security
        self.hosts = allowed_host_names(bind_host, security.allowed_hosts)
        self.origins = frozenset(o.rstrip("/").lower() for o in security.allowed_origins)
        self.body_limit = body_limit or (lambda _path: max_body_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get(_GUARDED):
            await self.app(scope, receive, send)
            return
        scope[_GUARDED] = True
        headers = Headers(scope=scope)
        if self.hosts is not None and host_name(headers.get("host", "")) not in self.hosts:
            await self._refuse(scope, receive, send, 400,
                               f"Host {headers.get('host', '')[:100]!r} is not one this server answers to "
                               "(see security.allowed_hosts)")
            return
        if scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        problem = cross_site_problem(headers, self.origins)
        if problem:
            await self._refuse(scope, receive, send, 403, problem)
            return
        problem = key_problem(headers, self.api_key)  # every state-changing route needs the key
        if problem:
            await self._refuse(scope, receive, send, 401, problem, {"WWW-Authenticate": "Bearer"}, close=True)
            return
        limit = self.body_limit(scope.get("path", ""))
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._refuse(scope, receive, send, 413,
                               f"request body is {int(declared)} bytes or more; the limit is {limit}", close=True)
            return
        chunks: list[bytes] = []
        size = 0
        try:
            with anyio.fail_after(self.security.body_timeout_s):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        await self._refuse(scope, receive, send, 413,
                                           f"request body is {size} bytes or more; the limit is {limit}", close=True)
                        return
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await self._refuse(scope, receive, send, 408,
                               f"the request body did not arrive within {self.security.body_timeout_s:g} s", close=True)
            return
        body = b"".join(chunks)
        if body and _is_json(headers):
            try:
                parse_json_strictly(body, self.security.max_json_depth)
            except JsonProblem as exc:
                await self._refuse(scope, receive, send, 422, str(exc))
                return
            except ValueError:
                pass  # not JSON: the route answers 400 with its own reason
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, status: int, detail: str,
                      headers: dict[str, str] | None = None, *, close: bool = False) -> None:
        headers = dict(headers or {})
        if close:
            headers["Connection"] = "close"
        body = self.refusal_body(scope.get("path", ""), status, detail)
        await JSONResponse(body, status_code=status, headers=headers)(scope, receive, send)
