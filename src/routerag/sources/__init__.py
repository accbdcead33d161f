"""Knowledge sources behind one protocol, and their registry."""

from routerag.sources.base import QueryResult, RetrievalError, RetrievalRequest, RetrievalResponse, Source

__all__ = ["QueryResult", "RetrievalError", "RetrievalRequest", "RetrievalResponse", "Source"]
