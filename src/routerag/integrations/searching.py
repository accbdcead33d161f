"""What the LangChain and LlamaIndex retrievers search: one routerag source — a mode of a local
index directory (mounted as ``routerag serve-retrieval`` mounts it) or one source of a remote
``routerag serve-retrieval`` server (:class:`~routerag.sources.remote.RemoteSource`) — queried for
the top ``k`` hits of one query (the routing retrievers: an index's modes, routed by
:mod:`routerag.integrations.routed`). Framework-free: both retrievers turn these hits into their own
document types."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from routerag.sources.base import MAX_K, Source
from routerag.trace import Hit

if TYPE_CHECKING:
    from routerag.sources.sourceset import SourceSet

DEFAULT_MODE = "passage"
DEFAULT_K = 5
# hit fields every retrieved document carries in its metadata
HIT_FIELDS = ("title", "score", "source", "mode", "doc_id", "rank")


def check_k(k: object, max_k: int = MAX_K) -> int:
    """``k`` as an int in 1..``max_k``, else a ``ValueError`` saying so."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= max_k:
        raise ValueError(f"k must be an integer from 1 to {max_k}, got {k!r}")
    return k


def check_source(source: object) -> Source:
    if not isinstance(source, Source):
        raise ValueError(f"expected a routerag source (name, mode, profile, search), got {type(source).__name__}")
    return source


def index_sources(index_dir: str | Path, modes: Sequence[str] | None = None) -> SourceSet:
    """The ``modes`` sources (default: every mode it can serve) of the index at ``index_dir``,
    loaded and mounted by the code of ``routerag serve-retrieval``
    (:func:`~routerag.api.serving.mounted_sources`), each named by its mode. An unknown mode, or
    one the index cannot serve, is a ``ValueError`` naming why."""
    from routerag.api.serving import ServeRequestError, mounted_sources
    from routerag.sources.registry import BUNDLE_MODES

    wanted = list(dict.fromkeys(modes or ()))
    for mode in wanted:
        if mode not in BUNDLE_MODES:
            raise ValueError(f"unknown mode {mode!r}; an index serves {', '.join(BUNDLE_MODES)}")
    what = "mode " + ", ".join(map(repr, wanted)) if wanted else "any mode"
    reasons: list[str] = []
    try:
        sources = mounted_sources(Path(index_dir), wanted or None, reasons.append)
    except ServeRequestError:
        raise ValueError(f"{index_dir}: cannot serve {what} ({'; '.join(reasons) or 'no source mounted'})") from None
    if wanted and reasons:
        raise ValueError(f"{index_dir}: cannot serve {what} ({'; '.join(reasons)})")
    return sources


def index_source(index_dir: str | Path, mode: str = DEFAULT_MODE) -> Source:
    """The ``mode`` source of the index at ``index_dir`` (:func:`index_sources`)."""
    return index_sources(index_dir, [mode]).get(mode)


def url_source(url: str, mode: str = DEFAULT_MODE, *, api_key: str | None = None, timeout_s: float = 30.0,
               retries: int = 2) -> Source:
    """The source named ``mode`` on the retrieval server at ``url``; one the server does not mount
    is a ``ValueError`` (:class:`~routerag.sources.base.RetrievalError`) listing the ones it does."""
    from routerag.sources.remote import RemoteSource

    return RemoteSource(url, mode, api_key=api_key, timeout_s=timeout_s, retries=retries)


def server_max_k(source: Source) -> int:
    """The largest ``k`` ``source`` accepts: a remote server's own limit, else the protocol's."""
    from routerag.sources.remote import RemoteSource

    if isinstance(source, RemoteSource):
        return min(MAX_K, source.client.info().limits.max_k)
    return MAX_K


def top_hits(source: Source, query: str, k: int) -> list[Hit]:
    """The top ``k`` hits of ``source`` for ``query`` (an empty query is a ``ValueError``)."""
    return source.search([query], k)[0].hits


def hit_metadata(hit: Hit, route: dict[str, Any] | None = None) -> dict[str, Any]:
    """A hit's fields as a retrieved document's metadata (the hit's own metadata, e.g. a table
    row's columns, under ``details`` when it has any; a routing retriever's decision under
    ``route``)."""
    meta: dict[str, Any] = {name: getattr(hit, name) for name in HIT_FIELDS}
    if hit.metadata:
        meta["details"] = dict(hit.metadata)
    if route is not None:
        meta["route"] = dict(route)
    return meta


def close_source(source: Source) -> None:
    """Close a remote source's connection pool (a local source holds none)."""
    close = getattr(source, "close", None)
    if callable(close):
        close()
