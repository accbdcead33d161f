"""GraphRAG-R1 (Yu et al., 2025): an R1-Searcher-style policy that searches with
``<|begin_of_query|> … <|end_of_query|>`` and reads ``<|begin_of_documents|> … <|end_of_documents|>``
holding knowledge-graph facts and passages, in one of the paper's evidence mixes:

=================  ====================================
``text5``          5 passages
``text3+graph10``  3 passages and 10 graph facts
``text1+graph10``  1 passage and 10 graph facts
``graph20``        20 graph facts
=================  ====================================

Passages come from the ``passage`` source, facts from the ``triples`` source (names are Params).
The protocol's tags and texts are :mod:`routerag.protocol.graphrag_r1_tags`; the episode
(:meth:`GraphRAGR1.episode`) is what the training environment runs too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from routerag.config import OMIT_AT_DEFAULT
from routerag.episode.engine import EpisodeRules, EpisodeSetup
from routerag.llm.base import GenerationParams, Message
from routerag.protocol.graphrag_r1_tags import (
    GRAPHRAG_R1_INSTRUCTIONS,
    GRAPHRAG_R1_INVALID,
    GRAPHRAG_R1_SYSTEM,
    R1_SEARCHER,
    graph_and_text_block,
)
from routerag.protocol.routerag_tags import ParsedAction
from routerag.runtime.parsing import clean_query
from routerag.strategies.agentic import SearchPlan, TagStrategy
from routerag.strategies.prompts import FORCE_ANSWER
from routerag.trace import Hit, Route

EvidenceMix = Literal["text5", "text3+graph10", "text1+graph10", "graph20"]
MIXES: dict[str, tuple[int, int]] = {  # (passages, facts)
    "text5": (5, 0),
    "text3+graph10": (3, 10),
    "text1+graph10": (1, 10),
    "graph20": (0, 20),
}


class GraphRAGR1Params(BaseModel):
    evidence: EvidenceMix = Field(default="text3+graph10", description="passages/facts per search")
    text_source: str = Field(default="passage", description="mounted source of passages")
    graph_source: str = Field(default="triples", description="mounted source of graph facts")
    max_turns: int = Field(default=4, ge=0, le=32, description="search budget (invalid turns count too)")
    max_tokens_per_turn: int = Field(default=512, ge=1, le=8192)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_query_chars: int = Field(default=300, ge=16, le=2000)
    # episode rules that training may set (added after runs were stored; the defaults keep the old behaviour)
    assistant_prefix: str = Field(
        default="", json_schema_extra=OMIT_AT_DEFAULT,
        description="text placed at the start of the assistant turn (prompt side, e.g. '<think>'); parsed with the first turn",
    )
    reader: Literal["policy", "top_hit_title"] = Field(
        default="policy", json_schema_extra=OMIT_AT_DEFAULT,
        description="who answers when the budget is spent: the policy (forced '<answer>' turn) or, for retrieval-only "
        "diagnostics, the title of the last search's first hit",
    )

    def plan_sources(self) -> dict[str, int]:
        n_text, n_graph = MIXES[self.evidence]
        return {name: n for name, n in ((self.text_source, n_text), (self.graph_source, n_graph)) if n > 0}


class EvidenceRenderer:
    """Splits hits into facts (from the graph source) and passages for the observation."""

    def __init__(self, graph_source: str) -> None:
        self.graph_source = graph_source

    def __call__(self, hits: Sequence[Hit]) -> str:
        facts = [h for h in hits if h.source == self.graph_source]
        passages = [h for h in hits if h.source != self.graph_source]
        return graph_and_text_block(facts, passages)


class GraphRAGR1(TagStrategy):
    name: ClassVar[str] = "graphrag-r1"
    revision: ClassVar[int] = 1  # 1: a query copying the prompt's placeholder searches the question instead
    Params: ClassVar[type[BaseModel]] = GraphRAGR1Params
    params: GraphRAGR1Params

    @classmethod
    def episode(cls, params: GraphRAGR1Params, question: str) -> EpisodeSetup:
        """GraphRAG-R1's episode: R1-Searcher's tags, the evidence mix's sources, facts and
        passages between the documents tags, R1-Searcher's system prompt and the bare question."""
        p = params
        rules = EpisodeRules(
            protocol=R1_SEARCHER, budget=p.max_turns, plan=EvidencePlanner(p), render=EvidenceRenderer(p.graph_source),
            invalid_message=GRAPHRAG_R1_INVALID, force_answer=FORCE_ANSWER, prefix=p.assistant_prefix, reader=p.reader,
        )
        messages = [Message(role="system", content=GRAPHRAG_R1_SYSTEM), Message(role="user", content=question)]
        return EpisodeSetup(rules=rules, messages=messages,
                            generation=GenerationParams(max_tokens=p.max_tokens_per_turn, temperature=p.temperature))

    @classmethod
    def search_sources(cls, params: GraphRAGR1Params) -> list[str]:
        return list(params.plan_sources())


class EvidencePlanner:
    """Sends every search to the evidence mix's sources (a query copying the prompt's
    placeholder searches the question instead)."""

    def __init__(self, params: GraphRAGR1Params) -> None:
        self.params = params

    def __call__(self, action: ParsedAction, question: str) -> SearchPlan:
        query, errors = clean_query(action.query, question, self.params.max_query_chars, GRAPHRAG_R1_INSTRUCTIONS)
        k = self.params.plan_sources()
        route = Route(choice="+".join(k), chosen_by="params", reason=f"evidence mix {self.params.evidence}")
        return SearchPlan(query=query, sources=list(k), k=k, route=route, errors=errors)
