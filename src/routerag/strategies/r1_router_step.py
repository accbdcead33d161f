"""One R1-Router decompose-and-route step over a given history (``r1-router-step``).

Where a benchmark holds gold step-wise trajectories (R1-Router's released Step-GRPO data), the
routing policy can be measured step by step without the knowledge bases: each question is one
step's user prompt (the origin question plus the gold sub-questions and answers so far), the
model writes ``<think>``, ``<sub-question>`` and ``<ret>`` once, and the step's ``route`` records
the retriever chosen. The evaluation then reads routing accuracy against the gold retriever
(``Question.gold_source``) and scores the sub-question against the gold one (EM/F1, semantic
similarity: R1-Router's sub-question reward). Nothing is retrieved.

A sub-question ``None`` is the decision to stop (route ``None``). No ``<sub-question>``, a copy
of the prompt's placeholder, or a ``<ret>`` naming no offered retriever is a format error and no
routing decision (unlike ``r1-router``, which recovers by falling back to the first retriever:
that fallback would count as a correct route whenever the gold is the first retriever).

With ``router`` other than ``policy`` (:mod:`routerag.strategies.step_routing`, e.g. ``keyword``
with an operator's rules file) the router reads the same prompt and decides the step, and no
model is called: the step writes no sub-question (its answer is ``None`` for a decision to stop,
else empty), so only the routing is scored.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field

from routerag.llm.base import GenerationParams, Message
from routerag.routing.base import Router
from routerag.runtime.loop import LoopStrategy, add_step, call_model, record_exchange
from routerag.strategies.prompts import R1_ROUTER_GUIDELINES, r1_router_ret_system
from routerag.strategies.r1_router import parse_sub_question
from routerag.strategies.step_routing import STOP, StepRoutingParams, route_step
from routerag.trace import Route, Trace


class R1RouterStepParams(StepRoutingParams):
    retrievers: list[str] = Field(
        default_factory=lambda: list(R1_ROUTER_GUIDELINES),
        description="knowledge-base names offered in the prompt (R1-Router's released three by default)",
    )
    guidelines: dict[str, str] = Field(
        default_factory=dict, description="selection guideline per retriever not in R1-Router's prompt"
    )
    max_tokens: int = Field(default=256, ge=1, le=8192)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_query_chars: int = Field(default=300, ge=16, le=2000)


class R1RouterStep(LoopStrategy):
    name: ClassVar[str] = "r1-router-step"
    Params: ClassVar[type[BaseModel]] = R1RouterStepParams
    params: R1RouterStepParams

    def execute(self, trace: Trace) -> None:
        p = self.params
        missing = [n for n in p.retrievers if n not in R1_ROUTER_GUIDELINES and n not in p.guidelines]
        if missing:
            raise ValueError(f"retrievers {missing} need a guideline (params.guidelines)")
        guidelines = {n: p.guidelines.get(n) or R1_ROUTER_GUIDELINES[n] for n in p.retrievers}
        router = p.build(self.context)
        if router is not None:
            self._route(trace, router, guidelines)
            return
        system = r1_router_ret_system(guidelines)
        messages = [Message(role="system", content=system), Message(role="user", content=trace.question)]
        response, call = call_model(self.context, messages, GenerationParams(max_tokens=p.max_tokens, temperature=p.temperature), "decompose")
        record_exchange(trace, messages, response.text)
        text = response.text
        # first=False: a missing or copied sub-question is an error, never replaced by the question
        sub = parse_sub_question(text, p.retrievers, trace.question, False, p.max_query_chars)
        errors = list(sub.errors)
        chosen: list[str] = []
        if sub.query is None:
            if not errors:  # "None": the decision that no further retrieval is needed
                chosen = [STOP]
        elif not sub.retriever_fallback and sub.retriever is not None:  # never the parser's default
            chosen = [sub.retriever]
        # the step's answer is the sub-question, "None" for a decision to stop, and nothing for a
        # broken output (which must not match a gold "None")
        answer = sub.text if sub.query is not None else STOP if chosen == [STOP] else ""
        route = Route(choice=chosen[0], chosen_by="policy") if chosen else None  # a broken output chose nothing
        add_step(trace, "route", query=sub.query, route=route, answer=answer, reasoning=sub.reasoning, raw_output=text,
                 model_calls=[call], latency_ms=call.latency_ms, format_error="; ".join(errors) or None)
        trace.answer = answer

    def _route(self, trace: Trace, router: Router, guidelines: dict[str, str]) -> None:
        """The router's decision over the step's prompt; no model call and no sub-question."""
        result, wall_ms = route_step(router, trace.question, guidelines)
        answer = STOP if result.choice == STOP else ""
        add_step(trace, "route", route=result.as_route(router.name), answer=answer, raw_output=result.raw_output or "",
                 model_calls=result.model_calls, format_error=result.format_error,
                 latency_ms=0.0 if result.model_calls else wall_ms)
        trace.answer = answer
