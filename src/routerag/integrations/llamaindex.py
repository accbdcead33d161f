"""A LlamaIndex retriever over routerag: :class:`RouteragLlamaRetriever` returns the top ``k`` hits
of one routerag source — a mode of a local index directory or a source of a remote ``routerag
serve-retrieval`` server — as ``NodeWithScore``\\ s::

    retriever = RouteragLlamaRetriever.from_index("my-index", mode="passage", k=5)
    retriever = RouteragLlamaRetriever.from_url("http://127.0.0.1:8765", mode="bm25")
    nodes = retriever.retrieve("Who was Teutberga married to?")
    engine = RetrieverQueryEngine.from_args(retriever, llm=...)

Each node is a ``TextNode`` (id: the document id; text: the passage) with the metadata of the
LangChain retriever (``title``, ``score``, ``source``, ``mode``, ``doc_id``, ``rank``); only the
title is shown to the LLM and the embedder. ``aretrieve`` runs the search in a worker thread.
Needs the ``integrations`` extra."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from routerag.integrations import searching
from routerag.sources.base import Source
from routerag.trace import Hit

# the metadata an LLM prompt (and an embedder) is not shown: everything but the title
HIDDEN_KEYS = [name for name in (*searching.HIT_FIELDS, "details") if name != "title"]


class RouteragLlamaRetriever(BaseRetriever):
    """The top ``k`` hits of a routerag source for each query, as LlamaIndex nodes."""

    def __init__(self, source: Source, k: int = searching.DEFAULT_K, *,
                 callback_manager: CallbackManager | None = None, verbose: bool = False) -> None:
        self.source = searching.check_source(source)
        self.k = searching.check_k(k, searching.server_max_k(source))
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @classmethod
    def from_index(cls, index_dir: str | Path, *, mode: str = searching.DEFAULT_MODE, k: int = searching.DEFAULT_K,
                   **kwargs: Any) -> RouteragLlamaRetriever:
        """Over the ``mode`` source (passage, bm25, graph, hybrid, triples) of an index built with
        ``routerag index``."""
        searching.check_k(k)
        return cls(searching.index_source(index_dir, mode), k, **kwargs)

    @classmethod
    def from_url(cls, url: str, *, mode: str = searching.DEFAULT_MODE, k: int = searching.DEFAULT_K,
                 api_key: str | None = None, timeout_s: float = 30.0, retries: int = 2,
                 **kwargs: Any) -> RouteragLlamaRetriever:
        """Over the source named ``mode`` of a ``routerag serve-retrieval`` server."""
        searching.check_k(k)
        source = searching.url_source(url, mode, api_key=api_key, timeout_s=timeout_s, retries=retries)
        return cls(source, k, **kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [to_node(hit) for hit in searching.top_hits(self.source, query_bundle.query_str, self.k)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = await asyncio.to_thread(searching.top_hits, self.source, query_bundle.query_str, self.k)
        return [to_node(hit) for hit in hits]

    def close(self) -> None:
        """Close a remote source's connections."""
        searching.close_source(self.source)


def to_node(hit: Hit) -> NodeWithScore:
    node = TextNode(id_=hit.doc_id, text=hit.text, metadata=searching.hit_metadata(hit),
                    excluded_llm_metadata_keys=list(HIDDEN_KEYS), excluded_embed_metadata_keys=list(HIDDEN_KEYS))
    return NodeWithScore(node=node, score=hit.score)
