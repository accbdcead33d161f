"""A front door's own refusal of a request over its limits (an empty or too long question; on the
service, too many questions, an unknown dataset, a run larger than a bound): a domain error, which
the service answers 422 with its message (:mod:`routerag.server.domain_errors`) and the MCP server
as the tool's error result."""

from __future__ import annotations

from routerag.errors import RouteragError

__all__ = ["RequestRefused"]


class RequestRefused(RouteragError, ValueError):
    """The request is over one of the front door's limits (the message says which)."""
