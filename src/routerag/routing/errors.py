"""The routing package's error: routing data or a router that cannot be used."""

from __future__ import annotations

from routerag.errors import RouteragError


class RoutingError(RouteragError, ValueError):
    """Routing data or a router that cannot be used (label files, router models, runs to label)."""
