"""Where a server listens and what its front door accepts, shared by ``routerag serve`` (the ask
service and the retrieval API) and the MCP server's HTTP transport: :class:`ListenSettings` (host,
port, API key, body limit, :class:`SecuritySettings`, and the rule that a non-loopback address needs
a key) and the admission bounds (:class:`AdmissionSettings`)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from routerag.provenance import FromRequest
from routerag.registry import is_plugin_name

__all__ = ["AdmissionSettings", "ListenSettings", "Port", "SecuritySettings", "is_loopback"]

Port = Annotated[int, Field(ge=0, le=65535, description="TCP port (0 = any free port)")]
"""A listening port; each server gives its own default (``port: Port = 8700``)."""


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class SecuritySettings(BaseModel):
    """What the front door (:mod:`routerag.edge.guard`) accepts; see docs/concepts/security.md."""

    model_config = ConfigDict(extra="forbid")

    allowed_hosts: list[str] | None = Field(
        None, description="Host header names served (\"*\" = any); default: the bound host, localhost, "
                          "127.0.0.1 and ::1 (any name when bound to 0.0.0.0/::, which needs an API key)")
    allowed_origins: list[str] = Field(
        default_factory=list, description="other browser origins (scheme://host:port) allowed to send "
                                          "state-changing requests; the server's own origin always is")
    body_timeout_s: float = Field(30.0, gt=0, le=3600, description="a request body must arrive within this time (408)")
    header_timeout_s: float = Field(
        10.0, gt=0, le=3600,
        description="a request's headers must have arrived this long after the connection opened (or its previous "
                    "response ended, once more bytes came); else the connection is closed — also one that sends nothing")
    keep_alive_timeout_s: int = Field(5, ge=1, le=3600, description="an idle keep-alive connection is closed after this time")
    max_header_bytes: int = Field(
        64 * 1024, ge=1024, le=16 * 1024 * 1024,
        description="bytes a request may send before its headers are complete; more: 431 and the connection is closed")
    max_json_depth: int = Field(32, ge=2, le=1000, description="deepest nesting of a JSON body (422)")
    allowed_plugins: list[str] = Field(
        default_factory=list,
        description="the ask service and the MCP server: plugin names (package.module:attribute) a request may give "
                    "where it names a registered part (a strategy, a router, a selector ...); a request naming any other "
                    "plugin is refused (422) before anything is imported. Plugins named in the configuration itself "
                    "need no entry")

    @field_validator("allowed_plugins")
    @classmethod
    def _check_plugins(cls, names: list[str]) -> list[str]:
        for name in names:
            if not is_plugin_name(name):
                raise ValueError(f"{name!r} is not a plugin name (package.module:attribute)")
        return names

    def from_request(self, data_dir: Path | None) -> FromRequest:
        """What a request may name here: registered parts, the allowed plugins, paths inside ``data_dir``."""
        return FromRequest(plugins=frozenset(self.allowed_plugins), data_dir=data_dir)


class AdmissionSettings(BaseModel):
    """Bounds on the work the ask service has accepted and not finished (``routerag.edge.admission``):
    over a bound a request gets 429 with ``Retry-After`` and the bound's name."""

    model_config = ConfigDict(extra="forbid")

    max_asks: int = Field(
        64, ge=1, le=1_000_000,
        description="asks (/v1/ask, /v1/ask/stream, the chat endpoint) queued or running at once, across clients")
    max_asks_per_key: int | None = Field(
        None, ge=1, le=1_000_000,
        description="asks queued or running at once per API key (a hash of it; with api_key set); none: only max_asks")
    max_run_answers: int = Field(
        50_000, ge=1, le=100_000_000,
        description="answers (questions x configurations) of background runs not yet answered, across runs; "
                    "a run larger than this is refused (422)")
    max_run_answers_per_key: int | None = Field(
        None, ge=1, le=100_000_000, description="the same per API key (with api_key set); none: only max_run_answers")
    retry_after_s: int = Field(1, ge=1, le=3600, description="the Retry-After (seconds) of a 429")


class ListenSettings(BaseModel):
    """Where a server listens and what its front door (:class:`~routerag.edge.guard.RequestGuard`)
    accepts. Binding an address beyond loopback needs an API key. Each server adds its own fields
    and its default ``port``."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field("127.0.0.1", description="bind address; loopback unless you mean to expose it")
    port: Port
    api_key: SecretStr | None = Field(
        None, description="when set, requests need `X-API-Key: KEY` or `Authorization: Bearer KEY` (the paths that do: "
                          "docs/concepts/security.md); required to bind a non-loopback address")
    max_body_bytes: int = Field(2_000_000, ge=1_024, description="larger request bodies get 413")
    security: SecuritySettings = Field(default_factory=SecuritySettings,
                                       description="Host/Origin checks, header and body limits, the plugins a request may name")

    def binds(self) -> bool:
        """Whether these settings bind ``host`` (the MCP server over stdio does not)."""
        return True

    @model_validator(mode="after")
    def _check_exposure(self) -> ListenSettings:
        if self.binds() and not is_loopback(self.host) and self.api_key is None:
            raise ValueError(f"binding {self.host!r} exposes the server beyond this machine; set an API key to do that")
        return self
