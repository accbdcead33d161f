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

Routing, with routerag's routers (any registered one by name, built with
:func:`~routerag.routing.build_router`, or a ``Router`` of your own):

* :class:`RouteragSelector`, a LlamaIndex selector for its own ``RouterRetriever`` and
  ``RouterQueryEngine``: each choice's ``ToolMetadata`` becomes a routerag choice (its name, else
  ``choice N``) with its description as the profile; the result's reason is the router's;
* :class:`RouteragRoutingLlamaRetriever`: each query routed across an index's sources (its modes)
  and the chosen one searched; each node's metadata also holds the decision under ``route``::

    engine = RouterQueryEngine(selector=RouteragSelector("learned"), query_engine_tools=[...], llm=...)
    retriever = RouteragRoutingLlamaRetriever.from_index("my-index", router="learned", k=5)

Needs the ``integrations`` extra."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llama_index.core.base.base_selector import BaseSelector, SelectorResult, SingleSelection
from llama_index.core.callbacks import CallbackManager
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.tools.types import ToolMetadata

from routerag.integrations import routed, searching
from routerag.routing.base import Router, RouteResult, RoutingError
from routerag.sources.base import Source
from routerag.trace import Hit

# the metadata an LLM prompt (and an embedder) is not shown: everything but the title
HIDDEN_KEYS = [name for name in (*searching.HIT_FIELDS, "details", "route") if name != "title"]


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


class RouteragSelector(BaseSelector):
    """A LlamaIndex selector backed by a routerag router: the choices' names and descriptions are
    routed as routerag choices and profiles; the best ``max_outputs`` are selected, the decision
    first, with the router's reason."""

    def __init__(self, router: str | Router = routed.DEFAULT_ROUTER, *, router_model: str | None = None,
                 margin: float = 0.0, rules: Any = None, max_outputs: int = 1) -> None:
        if isinstance(max_outputs, bool) or not isinstance(max_outputs, int) or max_outputs < 1:
            raise ValueError(f"max_outputs must be a positive integer, got {max_outputs!r}")
        self.router = routed.make_router(router, model=router_model, margin=margin, rules=rules)
        self.max_outputs = max_outputs

    def _get_prompts(self) -> PromptDictType:
        return {}  # a routerag router has no prompt to edit here

    def _update_prompts(self, prompts: PromptDictType) -> None:
        pass

    def _select(self, choices: Sequence[ToolMetadata], query: QueryBundle) -> SelectorResult:
        from routerag.routing.across import route_choices

        names = choice_names(choices)
        profiles = {name: choice.description for name, choice in zip(names, choices)}
        return selections(route_choices(self.router, query.query_str, profiles), names, self.router.name,
                          self.max_outputs)

    async def _aselect(self, choices: Sequence[ToolMetadata], query: QueryBundle) -> SelectorResult:
        return await asyncio.to_thread(self._select, choices, query)


def choice_names(choices: Sequence[ToolMetadata]) -> list[str]:
    """Each choice's routerag name: its tool name, else ``choice N`` (from 1); two choices of one
    name are a :class:`~routerag.routing.base.RoutingError` (a ``ValueError``)."""
    names = [choice.name or f"choice {i}" for i, choice in enumerate(choices, 1)]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise RoutingError(f"the choices must have distinct names; repeated: {', '.join(repeated)}")
    return names


def selections(result: RouteResult, names: list[str], router: str, max_outputs: int) -> SelectorResult:
    """The router's best ``max_outputs`` choices as a LlamaIndex selection, the decision first
    with the router's reason."""
    picked = []
    for rank, choice in enumerate(result.ranked[:max_outputs], 1):
        reason = result.reason if rank == 1 else f"ranked {rank} by {router} (score {choice.score:g})"
        picked.append(SingleSelection(index=names.index(choice.name), reason=reason or f"chosen by {router}"))
    return SelectorResult(selections=picked)


class RouteragRoutingLlamaRetriever(BaseRetriever):
    """Each query routed across sources by a routerag router; the chosen source's top ``k`` hits
    as LlamaIndex nodes carrying the decision (``metadata["route"]``)."""

    def __init__(self, sources: Any, router: str | Router = routed.DEFAULT_ROUTER, k: int = searching.DEFAULT_K, *,
                 choices: list[str] | None = None, callback_manager: CallbackManager | None = None,
                 verbose: bool = False) -> None:
        self.sources = routed.check_sources(sources)
        self.router = routed.make_router(router)
        self.k = searching.check_k(k)
        self.choices = routed.check_choices(self.sources, choices)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @classmethod
    def from_index(cls, index_dir: str | Path, router: str | Router = routed.DEFAULT_ROUTER, *,
                   modes: list[str] | None = None, k: int = searching.DEFAULT_K, router_model: str | None = None,
                   margin: float = 0.0, rules: Any = None, **kwargs: Any) -> RouteragRoutingLlamaRetriever:
        """Over the ``modes`` (default: every mode it can serve) of an index built with ``routerag
        index``; ``router_model``/``margin`` for the learned router, ``rules`` for the keyword router."""
        searching.check_k(k)
        built = routed.make_router(router, model=router_model, margin=margin, rules=rules)
        return cls(searching.index_sources(index_dir, modes), built, k, **kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return routed_nodes(routed.route_and_search(self.router, self.sources, query_bundle.query_str, self.k,
                                                    self.choices))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        found = await asyncio.to_thread(routed.route_and_search, self.router, self.sources, query_bundle.query_str,
                                        self.k, self.choices)
        return routed_nodes(found)


def routed_nodes(found: routed.RoutedSearch) -> list[NodeWithScore]:
    route = routed.route_metadata(found)
    return [to_node(hit, route) for hit in found.hits]


def to_node(hit: Hit, route: dict[str, Any] | None = None) -> NodeWithScore:
    node = TextNode(id_=hit.doc_id, text=hit.text, metadata=searching.hit_metadata(hit, route),
                    excluded_llm_metadata_keys=list(HIDDEN_KEYS), excluded_embed_metadata_keys=list(HIDDEN_KEYS))
    return NodeWithScore(node=node, score=hit.score)
