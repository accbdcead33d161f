"""R1-Router (Peng et al., 2025): step-wise decomposition with a chosen knowledge base.

Per step (at most ``max_steps``): one call writes ``<think>``, one ``<sub-question>`` and the
``<ret>`` knowledge base ("Text Retriever", "Table Retriever", ...; mapped to mounted sources by
``Params.retrievers``); the sub-question is retrieved from that source; a second call answers the
sub-question from that step's evidence. ``<sub-question>None`` ends the steps; a final call
answers the original question from the sub-questions and their answers. Prompts and evidence
labels (``ter-0``) follow the released Step-GRPO trajectories.

Recoveries: no ``<sub-question>`` tag, or one that copies the prompt's bracketed instruction
("[Exactly ONE single-hop question ...]": small untrained models do) -> the question itself on
the first step, else stop;
a ``<ret>`` naming no configured retriever -> the first configured one; an answer without
``<answer>`` tags -> the cleaned text after ``</think>``. Each is recorded as a format error.

With ``router`` other than ``policy`` (:mod:`routerag.strategies.step_routing`, e.g. ``keyword``
with an operator's rules file) a router decides each step's knowledge base over the step's prompt
before the model writes its sub-question, and the model's ``<ret>`` is not read; the router's
stop (``None``) ends the steps without a model call. The model's ``<sub-question>None`` still
ends them (there is nothing to search).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import ClassVar

from pydantic import BaseModel, Field

from routerag.llm.base import GenerationParams, Message
from routerag.protocol.routerag_tags import ANSWER_CLOSE, ANSWER_OPEN
from routerag.runtime.base import StrategyContext
from routerag.runtime.loop import LoopStrategy, add_step, call_model, record_exchange, retrieve_step
from routerag.runtime.parsing import clean_query, copies_instruction, extract_reasoning, extract_tag, match_name, tagged_answer
from routerag.strategies.prompts import (
    R1_ROUTER_FINAL_SYSTEM,
    R1_ROUTER_GUIDELINES,
    R1_ROUTER_RET_SYSTEM,
    R1_ROUTER_STEP_ANSWER_SYSTEM,
    r1_router_evidence,
    r1_router_final,
    r1_router_history,
    r1_router_ret_system,
)
from routerag.strategies.step_routing import STOP, StepRoutingParams, route_step
from routerag.trace import Hit, ModelCall, Route, Trace


class R1RouterParams(StepRoutingParams):
    retrievers: dict[str, str] = Field(
        default_factory=lambda: {"Text Retriever": "passage", "Table Retriever": "table"},
        description="R1-Router knowledge-base name -> mounted source; unmounted ones are not offered",
    )
    abbreviations: dict[str, str] = Field(
        default_factory=lambda: {"Text Retriever": "ter", "Text Image Retriever": "tir", "Table Retriever": "tar"},
        description="evidence label prefix per knowledge base (initials when missing)",
    )
    k: int = Field(default=5, ge=1, le=50, description="documents per sub-question")
    max_steps: int = Field(default=3, ge=1, le=10)
    max_tokens: int = Field(default=512, ge=1, le=8192)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_query_chars: int = Field(default=300, ge=16, le=2000)

    def abbreviation(self, name: str) -> str:
        return self.abbreviations.get(name) or "".join(w[0] for w in name.lower().split())

    def offered(self, mounted: set[str]) -> dict[str, str]:
        """The retrievers whose source is mounted; ValueError when none is."""
        offered = {name: src for name, src in self.retrievers.items() if src in mounted}
        if not offered:
            raise ValueError(f"none of the retrievers' sources {sorted(self.retrievers.values())} is mounted; "
                             f"mounted: {', '.join(sorted(mounted)) or '(none)'}")
        return offered

    def check_mounted(self, mounted: set[str]) -> None:
        """Checked when a request is accepted (the service), not first when the strategy runs."""
        self.offered(mounted)


class ParsedSubQuestion(BaseModel):
    """One parsed decomposition output; ``query is None`` means no further step."""

    query: str | None  # cleaned, for retrieval
    text: str = ""  # verbatim between the tags (as R1-Router's history shows it)
    retriever: str | None = None
    retriever_fallback: bool = False  # the output named no offered retriever; ``retriever`` is the first one
    reasoning: str = ""
    errors: list[str] = Field(default_factory=list)


# prompt text a small model copies instead of writing a sub-question: the decomposition prompt's
# bracketed instructions ("[Exactly ONE single-hop question ...]") and its quoted examples
# ("Find the capital and population of France", the retriever guidelines' "GDP of Japan in 2020")
_PLACEHOLDERS = [
    *re.findall(r"^\[(.+)\]\s*$", R1_ROUTER_RET_SYSTEM, re.MULTILINE),
    *re.findall(r'"([A-Z][^"\n]{19,})"', R1_ROUTER_RET_SYSTEM + "\n".join(R1_ROUTER_GUIDELINES.values())),
]


def _unbracket(text: str) -> str:
    """``[Who directed X?]`` -> ``Who directed X?``: the model imitates the prompt's placeholder brackets."""
    stripped = text.strip()
    return stripped[1:-1].strip() if len(stripped) > 1 and stripped[0] == "[" and stripped[-1] == "]" else text


def parse_sub_question(text: str, retrievers: list[str], question: str, first: bool, max_chars: int,
                       routed: str | None = None) -> ParsedSubQuestion:
    """``routed``: the knowledge base a router chose for this step (the ``<ret>`` is then not read)."""
    reasoning = extract_reasoning(text.split("<sub-question>")[0])
    sub = extract_tag(text, "<sub-question>", "</sub-question>")
    errors: list[str] = []
    missing = "missing_sub_question" if sub is None else "copied_instruction" if copies_instruction(sub, _PLACEHOLDERS) else None
    if missing is not None:
        if not first:
            return ParsedSubQuestion(query=None, reasoning=reasoning, errors=[missing])
        sub, errors = question, [missing]
    sub = _unbracket(sub)
    if sub.strip(".'\" \n").lower() in {"none", ""}:  # "None" / "[None]": no further step
        return ParsedSubQuestion(query=None, reasoning=reasoning, errors=errors if sub.strip() else ["empty_sub_question"])
    query, query_errors = clean_query(sub, question, max_chars)
    if routed is not None:
        return ParsedSubQuestion(query=query, text=sub, retriever=routed, reasoning=reasoning, errors=errors + query_errors)
    ret_text = extract_tag(text, "<ret>", "</ret>")
    retriever = match_name(ret_text, retrievers) if ret_text is not None else None
    fallback = retriever is None
    if fallback:
        errors.append("missing_retriever" if ret_text is None else f"unknown_retriever:{' '.join(ret_text.split())}")
        retriever = retrievers[0]
    return ParsedSubQuestion(query=query, text=sub, retriever=retriever, retriever_fallback=fallback, reasoning=reasoning,
                       errors=errors + query_errors)


class R1Router(LoopStrategy):
    name: ClassVar[str] = "r1-router"
    # 1: a sub-question copying the prompt's bracketed instruction is not searched;
    # 2: nor one copying its examples; "[None]" ends the steps like "None"; brackets around a sub-question are dropped
    revision: ClassVar[int] = 2
    Params: ClassVar[type[BaseModel]] = R1RouterParams
    params: R1RouterParams

    def _offered(self, ctx: StrategyContext) -> dict[str, str]:
        return self.params.offered(set(ctx.sources.names()))

    def _ask(self, trace: Trace, system: str, user: str, purpose: str) -> tuple[str, ModelCall]:
        messages = [Message(role="system", content=system), Message(role="user", content=user)]
        generation = GenerationParams(max_tokens=self.params.max_tokens, temperature=self.params.temperature)
        response, call = call_model(self.context, messages, generation, purpose)
        record_exchange(trace, messages, response.text)
        return response.text, call

    def execute(self, trace: Trace) -> None:
        offered = self._offered(self.context)
        guidelines = {n: R1_ROUTER_GUIDELINES.get(n) or self.context.sources.get(s).profile for n, s in offered.items()}
        ret_system = r1_router_ret_system(guidelines)
        router = self.params.build(self.context)
        history: list[tuple[str, str]] = []
        for step_no in range(self.params.max_steps):
            prompt = r1_router_history(trace.question, history)
            routed: Route | None = None
            if router is not None:
                result, wall_ms = route_step(router, prompt, guidelines)
                routed = result.as_route(router.name)
                if result.choice == STOP:  # the router ends the steps: no sub-question is written
                    add_step(trace, "route", route=routed, model_calls=result.model_calls, format_error=result.format_error,
                             latency_ms=0.0 if result.model_calls else wall_ms)
                    break
            text, call = self._ask(trace, ret_system, prompt, "decompose")
            sub = parse_sub_question(text, list(offered), trace.question, step_no == 0, self.params.max_query_chars,
                                     routed=routed.choice if routed is not None else None)
            if sub.query is None:
                add_step(trace, "decompose", reasoning=sub.reasoning, raw_output=text, model_calls=[call],
                         format_error="; ".join(sub.errors) or None)  # no query: the model stopped decomposing
                break
            history.append((sub.text, self._answer_step(trace, sub, offered, text, call, routed)))
        text, call = self._ask(trace, R1_ROUTER_FINAL_SYSTEM, r1_router_final(trace.question, history), "answer")
        answer, errors = tagged_answer(text)
        add_step(trace, "answer", query=trace.question, answer=answer, reasoning=extract_reasoning(text.split(ANSWER_OPEN)[0]),
                 raw_output=text, model_calls=[call], format_error="; ".join(errors) or None, latency_ms=call.latency_ms)
        trace.answer = answer

    def _answer_step(self, trace: Trace, sub: ParsedSubQuestion, offered: Mapping[str, str], text: str, call: ModelCall,
                     routed: Route | None = None) -> str:
        query, retriever = sub.query or trace.question, sub.retriever or next(iter(offered))
        legend = {name: self.params.abbreviation(name) for name in offered}
        abbr = legend[retriever]

        def render(hits: list[Hit]) -> str:
            return r1_router_evidence(sub.text or query, [(abbr, hits)], legend)

        step = retrieve_step(
            self.context, trace, query, [offered[retriever]], self.params.k, render,
            model_calls=[call], reasoning=sub.reasoning, raw_output=text,
            route=Route(choice=offered[retriever], chosen_by="policy", reason=f"<ret> {retriever}") if routed is None
            else routed.model_copy(update={"choice": offered[retriever]}),
            format_error="; ".join(sub.errors) or None,
        )
        step.latency_ms = call.latency_ms + step.retrieval_ms
        reply, answer_call = self._ask(trace, R1_ROUTER_STEP_ANSWER_SYSTEM, step.observation, "answer")
        answer, errors = tagged_answer(reply)
        add_step(trace, "answer", query=query, answer=answer, raw_output=reply, model_calls=[answer_call],
                 format_error="; ".join(errors) or None, latency_ms=answer_call.latency_ms, intermediate=True)
        inside = extract_tag(reply, ANSWER_OPEN, ANSWER_CLOSE)
        return inside if inside is not None and inside.strip() else answer  # history shows it as written
