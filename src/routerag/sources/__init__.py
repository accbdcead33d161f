"""Knowledge sources behind one protocol, and their registry."""

from routerag.sources.base import (
    Hit,
    QueryResult,
    RetrievalError,
    RetrievalRequest,
    RetrievalResponse,
    Source,
)

__all__ = ["Hit", "QueryResult", "RetrievalError", "RetrievalRequest", "RetrievalResponse", "Source"]
