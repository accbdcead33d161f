"""A LangChain retriever over routerag: :class:`RouteragRetriever` returns the top ``k`` hits of one
routerag source — a mode of a local index directory or a source of a remote ``routerag
serve-retrieval`` server — as LangChain ``Document``\\ s::

    retriever = RouteragRetriever.from_index("my-index", mode="passage", k=5)
    retriever = RouteragRetriever.from_url("http://127.0.0.1:8765", mode="bm25", api_key=None)
    docs = retriever.invoke("Who was Teutberga married to?")

``page_content`` is the passage text; ``metadata`` holds ``title``, ``score``, ``source``,
``mode``, ``doc_id`` and ``rank`` (and the hit's own ``details`` when it has any). The async path
(``ainvoke``) runs the search in a worker thread. Needs the ``integrations`` extra."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, field_validator, model_validator

from routerag.integrations import searching
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


def to_document(hit: Hit) -> Document:
    return Document(page_content=hit.text, metadata=searching.hit_metadata(hit), id=hit.doc_id)
