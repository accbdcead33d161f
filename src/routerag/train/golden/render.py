"""Planned hops rendered as one RouteRAG episode (typed segments) and as a trajectory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from routerag.corpus.schema import Question
from routerag.episode.segments import SegmentLog
from routerag.protocol.routerag_tags import information_block, render_answer, render_search, render_think
from routerag.strategies.prompts import routerag_prompt
from routerag.trace import Segment
from routerag.train.golden.grounding import Grounder
from routerag.train.golden.schema import GoldenHop, GoldenTrajectory


def render_routerag(question: str, hops: Sequence[GoldenHop], answer: str, *, final_think: str = "",
                    prompt_template: str | None = None, few_shot: bool = False) -> list[Segment]:
    """Segments of one RouteRAG episode (the prompt is the user text, not chat-rendered)."""
    prompt = prompt_template.format(question=question) if prompt_template else routerag_prompt(question, few_shot=few_shot)
    log = SegmentLog(prompt)
    for hop in hops:
        log.add("model", render_think(hop.think) + "\n" + render_search([hop.mode], hop.query))
        log.add("observation", information_block(hop.evidence))
    log.add("model", render_think(final_think or "I have the answer.") + "\n" + render_answer(answer))
    return log.segments



def from_hops(q: Question, planned: tuple[list[GoldenHop], str] | None, source: str, *, ground: Grounder | None = None,
              **render: Any) -> GoldenTrajectory | None:
    """A trajectory from planned hops (grounded in real retrieval when ``ground``)."""
    if planned is None:
        return None
    hops, final_think = planned
    if ground is not None:
        hops = ground(q.question, hops)
    segments = render_routerag(q.question, hops, q.answer, final_think=final_think, **render)
    return GoldenTrajectory(qid=q.qid, dataset=q.dataset, question=q.question, answers=q.answers, source=source, segments=segments)
