"""A LangChain retriever over routerag: :class:`RouteragRetriever` returns the top ``k`` hits of one
routerag source — a mode of a local index directory or a source of a remote ``routerag
serve-retrieval`` server — as LangChain ``Document``\\ s::

    retriever = RouteragRetriever.from_index("my-index", mode="passage", k=5)
    retriever = RouteragRetriever.from_url("http://127.0.0.1:8765", mode="bm25", api_key=None)
    docs = retriever.invoke("Who was Teutberga married to?")

``page_content`` is the passage text; ``metadata`` holds ``title``, ``score``, ``source``,
``mode``, ``doc_id`` and ``rank`` (and the hit's own ``details`` when it has any). The async path
(``ainvoke``) runs the search in a worker thread.

:class:`RouteragRoutingRetriever` routes each query across an index's sources (its modes) with a
routerag router — any registered one by name, built with :func:`~routerag.routing.build_router` —
and returns the chosen source's hits; each document's metadata also holds the decision under
``route`` (``choice``, ``router``, ``reason``, ``scores``, ``ranked``)::

    retriever = RouteragRoutingRetriever.from_index("my-index", router="learned", k=5)
    retriever = RouteragRoutingRetriever(sources=source_set, router="keyword", rules="rules.yaml")

Needs the ``integrations`` extra."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, field_validator, model_validator

from routerag.integrations import routed, searching
from routerag.routing.base import Router
from routerag.trace import Hit


class RouteragRetriever(BaseRetriever):
    """The top ``k`` hits of a routerag source for each query, as LangChain documents."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    source: Any = Field(description="a routerag Source: a mode of a local index, or a RemoteSource")
    k: int = Field(searching.DEFAULT_K, description="hits per query")

    @field_validator("source")
    @classmethod
    def _check_source(cls, source: Any) -> Any:
        return searching.check_source(source)

    @model_validator(mode="after")
    def _check_k(self) -> RouteragRetriever:
        searching.check_k(self.k, searching.server_max_k(self.source))
        return self

    @classmethod
    def from_index(cls, index_dir: str | Path, *, mode: str = searching.DEFAULT_MODE, k: int = searching.DEFAULT_K,
                   **kwargs: Any) -> RouteragRetriever:
        """Over the ``mode`` source (passage, bm25, graph, hybrid, triples) of an index built with
        ``routerag index``."""
        searching.check_k(k)
        return cls(source=searching.index_source(index_dir, mode), k=k, **kwargs)

    @classmethod
    def from_url(cls, url: str, *, mode: str = searching.DEFAULT_MODE, k: int = searching.DEFAULT_K,
                 api_key: str | None = None, timeout_s: float = 30.0, retries: int = 2,
                 **kwargs: Any) -> RouteragRetriever:
        """Over the source named ``mode`` of a ``routerag serve-retrieval`` server."""
        searching.check_k(k)
        source = searching.url_source(url, mode, api_key=api_key, timeout_s=timeout_s, retries=retries)
        return cls(source=source, k=k, **kwargs)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [to_document(hit) for hit in searching.top_hits(self.source, query, self.k)]

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        hits = await asyncio.to_thread(searching.top_hits, self.source, query, self.k)
        return [to_document(hit) for hit in hits]

    def close(self) -> None:
        """Close a remote source's connections."""
        searching.close_source(self.source)


class RouteragRoutingRetriever(BaseRetriever):
    """Each query routed across sources by a routerag router; the chosen source's top ``k`` hits,
    as LangChain documents carrying the decision (``metadata["route"]``)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    sources: Any = Field(description="a routerag SourceSet: the modes of a local index, or sources of your own")
    router: Any = Field(routed.DEFAULT_ROUTER, description="a registered router's name or a routerag Router")
    k: int = Field(searching.DEFAULT_K, description="hits per query")
    choices: list[str] | None = Field(None, description="the mounted sources to route across (default: every one)")

    @field_validator("sources")
    @classmethod
    def _check_sources(cls, sources: Any) -> Any:
        return routed.check_sources(sources)

    @field_validator("router", mode="before")
    @classmethod
    def _build_router(cls, router: Any) -> Router:
        return routed.make_router(router)

    @model_validator(mode="after")
    def _check(self) -> RouteragRoutingRetriever:
        searching.check_k(self.k)
        routed.check_choices(self.sources, self.choices)
        return self

    @classmethod
    def from_index(cls, index_dir: str | Path, router: str | Router = routed.DEFAULT_ROUTER, *,
                   modes: list[str] | None = None, k: int = searching.DEFAULT_K, router_model: str | None = None,
                   margin: float = 0.0, rules: Any = None, **kwargs: Any) -> RouteragRoutingRetriever:
        """Over the ``modes`` (default: every mode it can serve) of an index built with ``routerag
        index``; ``router_model``/``margin`` for the learned router, ``rules`` (a rules file or
        ``KeywordRules``) for the keyword router."""
        searching.check_k(k)
        built = routed.make_router(router, model=router_model, margin=margin, rules=rules)
        return cls(sources=searching.index_sources(index_dir, modes), router=built, k=k, **kwargs)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return routed_documents(routed.route_and_search(self.router, self.sources, query, self.k, self.choices))

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        found = await asyncio.to_thread(routed.route_and_search, self.router, self.sources, query, self.k, self.choices)
        return routed_documents(found)


def to_document(hit: Hit, route: dict[str, Any] | None = None) -> Document:
    return Document(page_content=hit.text, metadata=searching.hit_metadata(hit, route), id=hit.doc_id)


def routed_documents(found: routed.RoutedSearch) -> list[Document]:
    route = routed.route_metadata(found)
    return [to_document(hit, route) for hit in found.hits]
