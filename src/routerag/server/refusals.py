"""The service's own refusal of a request over its limits (an empty or too long question, too
many questions, an unknown dataset, a run larger than a bound): a domain error, answered 422 with
its message by :mod:`routerag.server.domain_errors`."""

from __future__ import annotations

from routerag.errors import RouteragError

__all__ = ["RequestRefused"]


class RequestRefused(RouteragError, ValueError):
    """The request is over one of the service's limits (the message says which)."""
