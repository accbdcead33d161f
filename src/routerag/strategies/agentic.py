"""The multi-turn tag-protocol loop shared by RouteRAG and GraphRAG-R1 (Search-R1 style).

One growing assistant turn: generate until a closing action tag; a search appends the rendered
evidence (an ``observation`` segment) and the model continues; an answer ends the episode. An
output with no action gets the invalid-action observation and spends one unit of the budget,
as searches do. When the budget is spent, a forced final call with ``<answer>`` pre-filled
records the answer. The strategy supplies the prompt, the tags, how a search is planned
(which sources, which ``k``) and how evidence is rendered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, Field

from routerag.llm.base import GenerationParams, Message
from routerag.strategies.base import StrategyContext
from routerag.strategies.loop import Render, Transcript, add_step, generated_text, retrieve_step
from routerag.strategies.parsing import ParsedAction, TagProtocol, clean_answer, parse_action
from routerag.trace import ForcedAnswer, Route, Trace


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


@dataclass(frozen=True)
class TagLoop:
    """One strategy's instance of the loop."""

    protocol: TagProtocol
    generation: GenerationParams  # its ``stop`` is set from the protocol
    budget: int  # searches (and invalid turns) before the forced answer
    plan: Planner
    render: Render
    invalid_message: str
    force_answer: str  # observation ending with the answer-open tag

    def run(self, ctx: StrategyContext, trace: Trace, messages: list[Message]) -> None:
        transcript = Transcript(messages)
        trace.segments = transcript.segments  # the same list: kept even if a call raises
        policy = self.generation.model_copy(update={"stop": self.protocol.stops})
        for _ in range(self.budget):
            response, call = transcript.generate(ctx, policy)
            text = generated_text(response)
            action = parse_action(text, self.protocol)
            transcript.add_model(text[: action.end])
            if not action.closed:
                transcript.add_observation(self._close_tag(action))
            common = {"model_calls": [call], "raw_output": text, "reasoning": action.reasoning}
            if action.kind == "answer":
                add_step(trace, "answer", answer=action.answer, format_error=action.format_error,
                         latency_ms=call.latency_ms, **common)
                trace.answer = action.answer
                return
            if action.kind == "search":
                plan = self.plan(action, trace.question)
                errors = action.errors + plan.errors
                step = retrieve_step(
                    ctx, trace, plan.query, plan.sources, plan.k, self.render,
                    route=plan.route, format_error="; ".join(errors) or None,
                    metadata={"tags": plan.tags, "raw_query": action.query}, **common,
                )
                step.latency_ms = call.latency_ms + step.retrieval_ms
                transcript.add_observation(step.observation)
            else:
                add_step(trace, "format_error", format_error=action.format_error,
                         observation=self.invalid_message, latency_ms=call.latency_ms, **common)
                transcript.add_observation(self.invalid_message)
        self._forced_answer(ctx, trace, transcript, policy)

    def _close_tag(self, action: ParsedAction) -> str:
        return self.protocol.search_close if action.kind == "search" else self.protocol.answer_close

    def _forced_answer(self, ctx: StrategyContext, trace: Trace, transcript: Transcript, policy: GenerationParams) -> None:
        transcript.add_observation(self.force_answer)
        response, call = transcript.generate(ctx, policy.model_copy(update={"stop": [self.protocol.answer_close]}), "answer")
        transcript.add_model(generated_text(response))
        errors = ["no_answer_within_budget"]
        if response.stop_string is None:
            errors.append("unclosed_answer")
        answer = clean_answer(response.text.split("<")[0]) or clean_answer(response.text)
        if not answer:
            errors.append("empty_answer")
        add_step(trace, "answer", answer=answer, format_error="; ".join(errors), model_calls=[call],
                 raw_output=generated_text(response), latency_ms=call.latency_ms, forced=ForcedAnswer())
        trace.answer = answer

