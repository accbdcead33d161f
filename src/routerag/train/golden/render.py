"""Planned hops rendered as one episode (typed segments) in a tag protocol, and as a trajectory.

One interface, :func:`render_golden`, with a protocol choice:

* ``routerag``: ``<search> [mode] query </search>`` turns and ``<information>`` observations of
  the hops' own evidence (gold paragraphs, or real retrieval when grounded);
* ``graphrag-r1``: ``<|begin_of_query|> query <|end_of_query|>`` turns, the observations produced
  by running the ``graphrag-r1`` strategy's episode itself (:class:`EpisodeReplay`: its query
  cleaning, its evidence mix of facts and passages, its renderer), with the golden turns in place
  of the policy. The hops' planned evidence is not used: the observation is what the strategy's
  episode shows for the hop's query.

:func:`rerender` turns a stored RouteRAG-protocol trajectory (a golden set) into another protocol
with the same question, the same reasoning and the same queries (:func:`planned_of`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from routerag.corpus.schema import Question
from routerag.episode.engine import run_episode
from routerag.episode.ports import Turn
from routerag.episode.segments import SegmentLog
from routerag.protocol.graphrag_r1_tags import render_query
from routerag.protocol.routerag_tags import (
    MODES,
    information_block,
    leading_mode_tags,
    parse_action,
    render_answer,
    render_search,
    render_think,
)
from routerag.strategies.prompts import routerag_prompt
from routerag.trace import Segment, Trace
from routerag.train.golden.grounding import Grounder
from routerag.train.golden.schema import GoldenHop, GoldenProtocol, GoldenTrajectory

FINAL_THINK = "I have the answer."


class Rendered(BaseModel):
    """One golden episode in a protocol: its segments (the prompt segment is the user message)
    and the episode's system message, if it has one."""

    segments: list[Segment]
    system: str | None = None


def render_routerag(question: str, hops: Sequence[GoldenHop], answer: str, *, final_think: str = "",
                    prompt_template: str | None = None, few_shot: bool = False) -> list[Segment]:
    """Segments of one RouteRAG episode (the prompt is the user text, not chat-rendered)."""
    prompt = prompt_template.format(question=question) if prompt_template else routerag_prompt(question, few_shot=few_shot)
    log = SegmentLog(prompt)
    for hop in hops:
        log.add("model", render_think(hop.think) + "\n" + render_search([hop.mode], hop.query))
        log.add("observation", information_block(hop.evidence))
    log.add("model", render_think(final_think or FINAL_THINK) + "\n" + render_answer(answer))
    return log.segments


def graphrag_r1_turns(hops: Sequence[GoldenHop], answer: str, final_think: str = "") -> list[str]:
    """The policy turns of a golden episode in GraphRAG-R1's protocol: one search per hop, then the
    answer. GraphRAG-R1 thinks before it answers: a trajectory whose last think says nothing (none,
    or the bare "I have the answer.") states what the evidence gave ("The answer is X."), as the
    MuSiQue trajectories' last thinks do, so the answer turn is not a fixed text to copy."""
    turns = [render_think(hop.think) + "\n" + render_query(hop.query) for hop in hops]
    final = final_think if final_think and final_think != FINAL_THINK else f"The answer is {answer}."
    return [*turns, render_think(final) + "\n" + render_answer(answer)]


class ReplayPolicy:
    """A policy port (:class:`~routerag.episode.ports.PolicyPort`) whose turns are given texts:
    the episode engine runs a golden episode as it runs a model's."""

    def __init__(self, prompt_text: str, turns: Sequence[str]) -> None:
        self._prompt = prompt_text
        self.left = list(turns)

    @property
    def prompt_text(self) -> str:
        return self._prompt

    def room(self) -> int | None:
        return None

    def size(self, text: str) -> int:
        return len(text)

    def generate(self, stops: list[str], purpose: str) -> Turn:
        text = self.left.pop(0) if self.left else ""
        ends = [(at, stop) for stop in stops if (at := text.find(stop)) >= 0]
        at, stop = min(ends) if ends else (len(text), None)
        return Turn(text=text, body=text[:at], stop=stop, latency_ms=0.0)

    def add_model(self, turn: Turn, keep: int) -> str:
        return turn.text[:keep]

    def add_observation(self, text: str, *, evidence: bool = False) -> str:
        return text


class EpisodeReplay:
    """Runs a tag strategy's episode (default ``graphrag-r1``) over ``sources`` with golden turns as
    the policy, so that every observation is the strategy's own retrieval and rendering of the
    turn's query. An episode the strategy would not end with the golden answer turn (as many
    searches as its budget: the episode then forces the answer) is not rendered (``dropped``; why, by
    the episode's finish, in ``drops``)."""

    def __init__(self, sources: Any, strategy: str = "graphrag-r1", params: BaseModel | dict[str, Any] | None = None) -> None:
        from routerag.runtime.base import StrategyContext
        from routerag.strategies.agentic import tag_strategy

        self.strategy = tag_strategy(strategy)
        self.params = params if isinstance(params, BaseModel) else self.strategy.Params.model_validate(params or {})
        missing = [s for s in self.strategy.search_sources(self.params) if s not in sources.names()]
        if missing:
            raise ValueError(f"sources {missing} are not mounted; mounted: {sources.names()}")
        self.ctx = StrategyContext(model=None, sources=sources)  # type: ignore[arg-type]  # retrieval only
        self.dropped = 0
        self.drops: Counter[str] = Counter()  # why episodes were not rendered: the episode's finish
        self.searches = 0

    def __call__(self, question: str, turns: Sequence[str]) -> Rendered | None:
        setup = self.strategy.episode(self.params, question)
        if setup.rules.prefix:
            raise ValueError("golden episodes with an assistant_prefix are not rendered (the prefix is prompt-side text)")
        users = [m.content for m in setup.messages if m.role == "user"]
        systems = [m.content for m in setup.messages if m.role == "system"]
        if len(users) != 1 or len(systems) > 1 or len(setup.messages) != len(users) + len(systems):
            raise ValueError("a golden episode's prompt is at most one system message and one user message")
        policy = ReplayPolicy(users[0], turns)
        trace = Trace(question=question, strategy=self.strategy.name)
        episode = run_episode(self.ctx, trace, policy, setup.rules)
        if episode.finish != "answer" or policy.left:
            self.dropped += 1
            self.drops[str(episode.finish) if episode.finish != "answer" else "turns left after the answer"] += 1
            return None
        self.searches += len(episode.searches)
        return Rendered(segments=trace.segments, system=systems[0] if systems else None)


def render_golden(question: str, hops: Sequence[GoldenHop], answer: str, *, protocol: GoldenProtocol = "routerag",
                  final_think: str = "", replay: EpisodeReplay | None = None, **routerag: Any) -> Rendered | None:
    """One golden episode in ``protocol``. ``graphrag-r1`` needs ``replay`` (its episode over the
    sources its observations come from); ``routerag`` takes the prompt options of
    :func:`render_routerag`. None when the episode cannot be rendered in the protocol."""
    if protocol == "routerag":
        return Rendered(segments=render_routerag(question, hops, answer, final_think=final_think, **routerag))
    if protocol == "graphrag-r1":
        if replay is None:
            raise ValueError("protocol graphrag-r1: the observations come from its episode's retrieval; pass replay=EpisodeReplay(sources)")
        if replay.strategy.name != "graphrag-r1":
            raise ValueError(f"protocol graphrag-r1 replays the graphrag-r1 episode, not {replay.strategy.name!r}")
        return replay(question, graphrag_r1_turns(hops, answer, final_think))
    raise ValueError(f"unknown golden protocol {protocol!r}")


def planned_of(trajectory: GoldenTrajectory) -> tuple[list[GoldenHop], str, str]:
    """``(hops, final think, answer)`` of a RouteRAG-protocol trajectory: each search's reasoning,
    mode and query (the evidence is left out), read back with the protocol's parser."""
    if trajectory.protocol != "routerag":
        raise ValueError(f"trajectory {trajectory.qid}: planned hops are read from RouteRAG-protocol trajectories, not {trajectory.protocol}")
    hops: list[GoldenHop] = []
    for seg in trajectory.segments:
        if seg.kind != "model":
            continue
        action = parse_action(seg.text)
        if action.kind == "search":
            tags, query = leading_mode_tags(action.query, MODES)
            hops.append(GoldenHop(think=action.reasoning, mode=tags[0] if tags else "passage", query=query))
        elif action.kind == "answer":
            return hops, action.reasoning, action.answer
    raise ValueError(f"trajectory {trajectory.qid} has no answer turn")


def rerender(trajectory: GoldenTrajectory, protocol: GoldenProtocol, *, replay: EpisodeReplay | None = None,
             **routerag: Any) -> GoldenTrajectory | None:
    """A stored RouteRAG-protocol trajectory in ``protocol``: same question, reasoning, queries and
    answer; observations as :func:`render_golden` makes them (None when it cannot be rendered)."""
    hops, final_think, answer = planned_of(trajectory)
    rendered = render_golden(trajectory.question, hops, answer, protocol=protocol, final_think=final_think,
                             replay=replay, **routerag)
    if rendered is None:
        return None
    return trajectory.model_copy(update={"segments": rendered.segments, "system": rendered.system, "protocol": protocol})


def from_hops(q: Question, planned: tuple[list[GoldenHop], str] | None, source: str, *, ground: Grounder | None = None,
              protocol: GoldenProtocol = "routerag", replay: EpisodeReplay | None = None,
              **render: Any) -> GoldenTrajectory | None:
    """A trajectory from planned hops (grounded in real retrieval when ``ground``; in
    ``graphrag-r1`` the observations are its episode's retrieval instead)."""
    if planned is None:
        return None
    hops, final_think = planned
    if ground is not None and protocol == "routerag":
        hops = ground(q.question, hops)
    rendered = render_golden(q.question, hops, q.answer, protocol=protocol, final_think=final_think, replay=replay, **render)
    if rendered is None:
        return None
    return GoldenTrajectory(qid=q.qid, dataset=q.dataset, question=q.question, answers=q.answers, source=source,
                            segments=rendered.segments, protocol=protocol, system=rendered.system)
