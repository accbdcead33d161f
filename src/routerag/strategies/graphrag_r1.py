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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from routerag.llm.base import GenerationParams, Message
from routerag.runtime.loop import LoopStrategy
from routerag.runtime.parsing import R1_SEARCHER, ParsedAction, clean_query
from routerag.strategies.agentic import SearchPlan, TagLoop
from routerag.strategies.prompts import FORCE_ANSWER, GRAPHRAG_R1_INVALID, GRAPHRAG_R1_SYSTEM, graph_and_text_block
from routerag.trace import Hit, Route, Trace

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


# the system prompt's placeholder query; the untrained 0.5B copied it into 28% of its 2Wiki searches
GRAPHRAG_R1_INSTRUCTIONS = ('search query (only list keywords, such as "keyword_1 keyword_2 ...")',)


class GraphRAGR1(LoopStrategy):
    name: ClassVar[str] = "graphrag-r1"
    revision: ClassVar[int] = 1  # 1: a query copying the prompt's placeholder searches the question instead
    Params: ClassVar[type[BaseModel]] = GraphRAGR1Params
    params: GraphRAGR1Params

    def plan(self, action: ParsedAction, question: str) -> SearchPlan:
        query, errors = clean_query(action.query, question, self.params.max_query_chars, GRAPHRAG_R1_INSTRUCTIONS)
        k = self.params.plan_sources()
        route = Route(choice="+".join(k), chosen_by="params", reason=f"evidence mix {self.params.evidence}")
        return SearchPlan(query=query, sources=list(k), k=k, route=route, errors=errors)

    def execute(self, trace: Trace) -> None:
        p = self.params
        loop = TagLoop(
            protocol=R1_SEARCHER,
            generation=GenerationParams(max_tokens=p.max_tokens_per_turn, temperature=p.temperature),
            budget=p.max_turns, plan=self.plan, render=EvidenceRenderer(p.graph_source),
            invalid_message=GRAPHRAG_R1_INVALID, force_answer=FORCE_ANSWER,
        )
        messages = [Message(role="system", content=GRAPHRAG_R1_SYSTEM), Message(role="user", content=trace.question)]
        loop.run(self.context, trace, messages)
