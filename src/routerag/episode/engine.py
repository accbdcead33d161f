"""The episode engine: the one implementation of a multi-turn tag-protocol episode (Search-R1
style), for evaluation (:class:`~routerag.strategies.agentic.TagStrategy`) and training
(:class:`~routerag.train.env.RolloutEnv`) alike.

An explicit state machine (after verl's agent loop)::

    PENDING ──► GENERATING ──┬─ answer ───────────────────────────────────► TERMINATED
                  ▲          ├─ search ──► TOOL_CALLING (retrieve, observe) ─┐
                  │          └─ no action ► INVALID (invalid-action cue) ────┤
                  └────────────── budget left ◄──────────────────────────────┤
                                 budget spent ─► FORCING ─► TERMINATED ◄─────┘
              (no completion room left before a turn ─► TERMINATED, "truncated")

The engine owns the protocol's rules, once: the turn budget (searches and invalid turns both
spend it), closing an unclosed action tag, the invalid-action recovery, the forced answer when
the budget is spent, observation truncation (evidence only, to the port's token limit), segment
merging and the step records. The policy is a :class:`~routerag.episode.ports.PolicyPort`; a
strategy supplies the :class:`EpisodeRules` (tags, planner, renderer, messages).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from routerag.episode.ports import PolicyPort, Turn
from routerag.episode.segments import SegmentLog
from routerag.llm.base import GenerationParams, Message
from routerag.protocol.routerag_tags import ParsedAction, TagProtocol, parse_action
from routerag.runtime.base import StrategyContext
from routerag.runtime.loop import Render, add_step, retrieve_step
from routerag.runtime.parsing import clean_answer
from routerag.trace import ForcedAnswer, Route, Step, Trace

Finish = Literal["answer", "forced", "truncated"]
StepObserver = Callable[[Step], None]


class State(enum.Enum):
    PENDING = "pending"
    GENERATING = "generating"
    TOOL_CALLING = "tool_calling"
    INVALID = "invalid"
    FORCING = "forcing"
    TERMINATED = "terminated"


class SearchPlan(BaseModel):
    """Where one search goes: the cleaned query, the sources and ``k`` (per source or for all)."""

    query: str
    sources: list[str]
    k: int | dict[str, int]
    errors: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    route: Route | None = None  # where the search goes and why, recorded in the retrieve step

    @property
    def mode(self) -> str | None:
        """The mode chosen, for planners that route by mode (RouteRAG's ModeRouter)."""
        return self.route.mode if self.route is not None else None


Planner = Callable[[ParsedAction, str], SearchPlan]  # (action, question) -> plan
MODE_ERRORS = ("missing_mode", "unknown_mode")  # what ``strict_modes`` refuses


@dataclass(frozen=True)
class EpisodeRules:
    """What varies between the strategies that run on the engine. A tag strategy builds its rules
    from its Params (:meth:`~routerag.strategies.agentic.TagStrategy.episode`), for evaluation and
    for the training environment alike; limits of a port (tokens per turn, per completion, per
    observation) belong to the port, not here."""

    protocol: TagProtocol
    budget: int  # searches (and invalid turns) before the forced answer
    plan: Planner
    render: Render
    invalid_message: str
    force_answer: str  # observation ending with the answer-open tag
    prefix: str = ""  # prompt-side text that starts the assistant turn; parsed with the first turn
    strict_modes: bool = False  # a search without a usable mode tag is an invalid action (no retrieval)
    reader: Literal["policy", "top_hit_title"] = "policy"  # who answers when the budget is spent
    search_cost: Callable[[SearchPlan], float] | None = None  # the charge of one retrieval (Step.retrieval_cost)


@dataclass(frozen=True)
class EpisodeSetup:
    """One tag strategy's episode for one question: its rules, its prompt messages (system and
    user turns, before any chat template) and the per-turn generation settings of a chat model
    (the token port of training takes its own limits)."""

    rules: EpisodeRules
    messages: list[Message]
    generation: GenerationParams


class Episode:
    """One run of the state machine over ``trace`` (filled in place: steps, segments, answer).

    ``on_step`` is the step-observer hook: called with every step the engine appends, right
    after it is appended (a UI stream, a logger)."""

    def __init__(self, ctx: StrategyContext, trace: Trace, policy: PolicyPort, rules: EpisodeRules,
                 on_step: StepObserver | None = None) -> None:
        self.ctx, self.trace, self.policy, self.rules, self.on_step = ctx, trace, policy, rules, on_step
        self.state = State.PENDING
        self.history: list[State] = [State.PENDING]  # every state entered, in order
        self.turns = 0
        self.finish: Finish | None = None
        self.policy_ms = 0.0  # generation time of the policy turns (the forced answer not included)
        self.searches: list[tuple[SearchPlan, Step]] = []  # every retrieval made: its plan and its step
        self._turn: Turn | None = None
        self._action: ParsedAction | None = None
        self.log = SegmentLog(policy.prompt_text)

    # ---------------------------------------------------------------- the machine

    def run(self) -> Finish:
        handlers: dict[State, Callable[[], State]] = {
            State.PENDING: self._pending,
            State.GENERATING: self._generating,
            State.TOOL_CALLING: self._tool_calling,
            State.INVALID: self._invalid,
            State.FORCING: self._forcing,
        }
        while self.state is not State.TERMINATED:
            self.state = handlers[self.state]()
            self.history.append(self.state)
        assert self.finish is not None
        return self.finish

    def _pending(self) -> State:
        self.trace.segments = self.log.segments  # the same list: kept even if a call raises
        return self._next_turn()

    def _next_turn(self) -> State:
        if self.turns >= self.rules.budget:
            return State.FORCING
        room = self.policy.room()
        if room is not None and room <= 0:
            return self._terminate("truncated")
        return State.GENERATING

    def _generating(self) -> State:
        rules, pending = self.rules, self.rules.prefix if self.turns == 0 else ""
        self.turns += 1
        turn = self.policy.generate(rules.protocol.stops, "policy")
        self.policy_ms += turn.latency_ms
        action = parse_action(pending + turn.text, rules.protocol)
        self.log.add("model", self.policy.add_model(turn, action.end - len(pending)))
        if not action.closed:
            close = rules.protocol.search_close if action.kind == "search" else rules.protocol.answer_close
            self._observe(close)
        self._turn, self._action = turn, action
        if action.kind == "answer":
            self._record("answer", answer=action.answer, format_error=action.format_error)
            self.trace.answer = action.answer
            return self._terminate("answer")
        return State.TOOL_CALLING if action.kind == "search" else State.INVALID

    def _tool_calling(self) -> State:
        rules, turn, action = self.rules, self._current_turn(), self._current_action()
        plan = rules.plan(action, self.trace.question)
        errors = action.errors + plan.errors
        if rules.strict_modes and any(e.startswith(MODE_ERRORS) for e in plan.errors):
            self._record("format_error", format_error="; ".join(errors), observation=rules.invalid_message)
            self._observe(rules.invalid_message)
            return self._next_turn()
        step = retrieve_step(
            self.ctx, self.trace, plan.query, plan.sources, plan.k, rules.render,
            route=plan.route, format_error="; ".join(errors) or None,
            retrieval_cost=rules.search_cost(plan) if rules.search_cost is not None else None,
            **self._common(turn, action),
        )
        step.latency_ms = turn.latency_ms + step.retrieval_ms
        self.searches.append((plan, step))
        self._emit(step)
        self._observe(step.observation, evidence=True)
        return self._next_turn()

    def _invalid(self) -> State:
        action = self._current_action()
        self._record("format_error", format_error=action.format_error, observation=self.rules.invalid_message)
        self._observe(self.rules.invalid_message)
        return self._next_turn()

    def _forcing(self) -> State:
        rules, trace = self.rules, self.trace
        if rules.reader == "top_hit_title":  # routing-only diagnostics: no reading turn
            last = trace.search_steps[-1] if trace.search_steps else None
            answer = last.hits[0].title if last and last.hits else ""
            self._emit(add_step(trace, "answer", answer=answer, format_error=None if answer else "empty_answer",
                                forced=ForcedAnswer(reader="top_hit_title")))
            trace.answer = answer
            return self._terminate("forced")
        room = self.policy.room()
        if room is not None and room <= self.policy.size(rules.force_answer) + 1:
            self._emit(add_step(trace, "answer", answer="", format_error="truncated; empty_answer", forced=ForcedAnswer()))
            return self._terminate("truncated")
        self._observe(rules.force_answer)
        turn = self.policy.generate([rules.protocol.answer_close], "answer")
        self.log.add("model", self.policy.add_model(turn, len(turn.text)))
        errors = ["no_answer_within_budget"]
        if turn.stop is None:
            errors.append("unclosed_answer")
        answer = clean_answer(turn.body.split("<")[0]) or clean_answer(turn.body)
        if not answer:
            errors.append("empty_answer")
        self._emit(add_step(trace, "answer", answer=answer, format_error="; ".join(errors), model_calls=list(turn.calls),
                            raw_output=turn.text, latency_ms=turn.latency_ms, forced=ForcedAnswer()))
        trace.answer = answer
        return self._terminate("forced")

    # ---------------------------------------------------------------- helpers

    def _terminate(self, finish: Finish) -> State:
        self.finish = finish
        return State.TERMINATED

    def _current_turn(self) -> Turn:
        assert self._turn is not None
        return self._turn

    def _current_action(self) -> ParsedAction:
        assert self._action is not None
        return self._action

    @staticmethod
    def _common(turn: Turn, action: ParsedAction) -> dict[str, Any]:
        return {"model_calls": list(turn.calls), "raw_output": turn.text, "reasoning": action.reasoning,
                "latency_ms": turn.latency_ms}

    def _record(self, kind: Literal["answer", "format_error"], **fields: Any) -> Step:
        """Append the step of the current turn (its model call, output and reasoning)."""
        step = add_step(self.trace, kind, **self._common(self._current_turn(), self._current_action()), **fields)
        self._emit(step)
        return step

    def _emit(self, step: Step) -> None:
        if self.on_step is not None:
            self.on_step(step)

    def _observe(self, text: str, *, evidence: bool = False) -> None:
        self.log.add("observation", self.policy.add_observation(text, evidence=evidence))


def run_episode(ctx: StrategyContext, trace: Trace, policy: PolicyPort, rules: EpisodeRules,
                on_step: StepObserver | None = None) -> Episode:
    """Run one episode to its end and return it (``finish``, ``policy_ms``)."""
    episode = Episode(ctx, trace, policy, rules, on_step)
    episode.run()
    return episode
