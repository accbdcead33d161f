"""The retrieve-then-verify pipeline shared by RealRoute and DeepSieve's hard routing:

    decompose -> for each sub-query in dependency order:
                    bind earlier answers -> route -> gather evidence -> answer
                    -> (on failure) reflect -> gather -> answer ... (at most ``max_reflections``)
              -> fuse the sub-answers (fallback: the last-hop answer)

The two strategies differ only in how evidence is gathered (an :class:`EvidenceGatherer`):
RealRoute searches every source and keeps evidence under the Adaptive Cap; hard-route searches
the one routed source. Every model call and retrieval is a :class:`Step` of the trace.
"""

from __future__ import annotations

import time
from typing import Annotated, Protocol

from pydantic import BaseModel, Field, model_validator

from routerag.config import OMIT_AT_DEFAULT
from routerag.llm.base import GenerationParams, Message
from routerag.registry import RegisteredName
from routerag.routing import ROUTERS, RouterModel
from routerag.routing.keyword import RouterRules, rules_fingerprint, strategy_rules
from routerag.runtime.base import StrategyContext
from routerag.runtime.loop import add_step, call_model, generated_text
from routerag.sources.base import MAX_QUERY_CHARS
from routerag.strategies.decompose import Plan, SubQuery, bind, decompose_messages, execution_order, parse_plan
from routerag.strategies.fusion_answer import Hop, fuse_messages, last_hop_answer, parse_fusion
from routerag.strategies.reflection import Attempt, parse_reflection, reflect_messages
from routerag.strategies.subanswer import SubAnswer, answer_messages, parse_subanswer, render_evidence
from routerag.trace import ForcedAnswer, Hit, ModelCall, PlannedSubQuery, Route, Selection, SubQueryRef, Trace


class SieveParams(BaseModel):
    """Parameters shared by the retrieve-then-verify strategies."""

    decomposition: bool = Field(default=True, description="split the question into dependent sub-queries")
    max_subqueries: int = Field(default=4, ge=1, le=10, description="sub-queries kept from the plan")
    max_reflections: int = Field(default=2, ge=0, le=5, description="retries of a failed sub-query")
    router: Annotated[str, RegisteredName(ROUTERS)] = Field(
        default="llm",
        description="how a sub-query's source is chosen (routerag.routing.ROUTERS, or a plugin's pkg.mod:factory): an "
        "LLM call over the source profiles (the papers'), the profile most similar to the query by sentence embedding, a classifier "
        "trained on routing outcomes (`learned`), or the operator's regular-expression rules (`keyword`, with router_rules; "
        "the last three make no model call)",
        json_schema_extra=OMIT_AT_DEFAULT,  # added after runs were stored; "llm" is the old behaviour
    )
    router_model: RouterModel | None = Field(
        default=None,
        description="learned router: a shipped router's name or a model folder (default: the shipped one whose "
        "labels cover the mounted sources)",
        json_schema_extra=OMIT_AT_DEFAULT,
    )
    router_margin: float = Field(
        default=0.0, ge=0.0, le=1.0,
        description="learned router: choose the cheapest source whose predicted success is within this margin of the best",
        json_schema_extra=OMIT_AT_DEFAULT,
    )
    router_rules: RouterRules | None = Field(
        default=None,
        description="keyword router: its rules file (YAML: rules: [{pattern, choice}, ...], default); the operator's "
        "configuration only, refused from a request",
        json_schema_extra=OMIT_AT_DEFAULT,
    )
    fuse_single_hop: bool = Field(
        default=True, description="run the fusion call also when there is one sub-query (else its answer is final)"
    )
    passage_chars: int = Field(default=1500, ge=50, description="characters of each passage shown to the model")
    max_new_tokens: int = Field(default=256, ge=16, description="generation limit of every model call")
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    stop_after_object: bool = Field(
        default=True,
        description="end flat JSON replies (route, answer, reflect, fuse) at their first '}': small models "
        "ramble after the object, and this saves their tokens",
    )

    def fingerprint_inputs(self) -> dict[str, str]:
        """The learned router's weights: the one ``router_model`` names, or, without a name, every
        shipped router (the one covering the mounted sources is chosen only once they are
        mounted), so that a retrained shipped router never mixes into a resumed run."""
        if self.router != "learned":
            return rules_fingerprint(self.router, self.router_rules)
        from routerag.routing.learned import model_fingerprint, shipped_fingerprint

        if self.router_model:
            return {"router_model": model_fingerprint(self.router_model, [])}
        return {"router_models": shipped_fingerprint()}

    @model_validator(mode="after")
    def _rules_load(self) -> SieveParams:
        strategy_rules(self.router, self.router_rules)
        return self

    def generation(self, flat_json: bool = False) -> GenerationParams:
        stop = ["}"] if flat_json and self.stop_after_object else []
        return GenerationParams(max_tokens=self.max_new_tokens, temperature=self.temperature, stop=stop)


class EvidenceGatherer(Protocol):
    """How one strategy routes and retrieves for a sub-query; each method records its own steps."""

    def route(self, trace: Trace, subquery_id: str, query: str) -> str | None:
        """The routed source (preferred or chosen) or ``None`` when this configuration does not route."""
        ...

    def gather(self, trace: Trace, subquery_id: str, query: str, source: str | None) -> list[Hit]:
        """Retrieve for ``query`` and return the evidence to show the answering call."""
        ...


def searchable(query: str) -> str:
    """The query cut to what a retrieval request accepts (law-med questions can be longer)."""
    return query if len(query) <= MAX_QUERY_CHARS else query[:MAX_QUERY_CHARS]


def route_step(context: StrategyContext, params: SieveParams, trace: Trace, subquery_id: str, query: str) -> str:
    """One routing decision over the source profiles (by the router ``params.router`` names),
    recorded as a ``route`` step; the chosen source."""
    from routerag.routing import RouterDeps, build_router
    from routerag.routing.across import route_sources

    deps = RouterDeps(context=context, generation=params.generation(flat_json=True), model=params.router_model,
                      margin=params.router_margin, rules=strategy_rules(params.router, params.router_rules))
    start = time.perf_counter()
    router = build_router(params.router, deps)
    result = route_sources(router, query, context.sources)
    wall_ms = 1000 * (time.perf_counter() - start)
    add_step(
        trace,
        "route",
        query=query,
        route=result.as_route(router.name),
        model_calls=result.model_calls,
        raw_output=result.raw_output or "",
        format_error=result.format_error,
        latency_ms=0.0 if result.model_calls else wall_ms,  # a model call carries its own latency
        subquery=SubQueryRef(id=subquery_id, preferred_source=result.choice),
    )
    return result.choice


def _planned(subqueries: list[SubQuery]) -> list[PlannedSubQuery]:
    """The plan as the trace records it."""
    return [PlannedSubQuery.model_validate(s.model_dump()) for s in subqueries]


class SievePipeline:
    def __init__(self, context: StrategyContext, params: SieveParams, gatherer: EvidenceGatherer) -> None:
        self.context = context
        self.params = params
        self.gatherer = gatherer

    def _call(self, messages: list[Message], purpose: str, *, flat_json: bool = True) -> tuple[str, ModelCall]:
        """One model call; the generated text (with the stop string that ended it) and its record."""
        response, call = call_model(self.context, messages, self.params.generation(flat_json), purpose)
        return generated_text(response), call

    # ------------------------------------------------------------ stages

    def plan(self, trace: Trace) -> tuple[Plan, list[SubQuery]]:
        """The plan (sub-queries in the model's order, which ``#n`` placeholders count in) and
        the order to execute them in."""
        if not self.params.decomposition:
            plan = Plan.single(trace.question)
            add_step(trace, "decompose", query=trace.question, plan=_planned(plan.subqueries))
            return plan, plan.subqueries
        text, call = self._call(
            decompose_messages(trace.question, self.params.max_subqueries), "decompose", flat_json=False
        )
        plan = parse_plan(text, trace.question, self.params.max_subqueries)
        ordered, note = execution_order(plan.subqueries)
        error = "; ".join(e for e in (plan.format_error, note) if e) or None
        add_step(
            trace,
            "decompose",
            query=trace.question,
            model_calls=[call],
            raw_output=text,
            format_error=error,
            plan=_planned(ordered),
        )
        return plan, ordered

    def answer(self, trace: Trace, subquery_id: str, attempt: int, query: str, source: str | None, evidence: list[Hit]) -> SubAnswer:
        shown = render_evidence(evidence, self.params.passage_chars)
        text, call = self._call(answer_messages(query, shown, trace.question), "answer")
        sub, error = parse_subanswer(text)
        add_step(
            trace,
            "answer",
            query=query,
            sources=list(dict.fromkeys(h.source for h in evidence)),  # where the shown evidence came from
            observation=shown,
            answer=sub.answer,
            reasoning=sub.reason,
            model_calls=[call],
            raw_output=text,
            format_error=error,
            selection=Selection(kept=[h.doc_id for h in evidence], kept_sources=[h.source for h in evidence]),
            subquery=SubQueryRef(id=subquery_id, attempt=attempt, preferred_source=source, success=sub.success),
        )
        return sub

    def reflect(self, trace: Trace, subquery_id: str, attempts: list[Attempt]) -> tuple[str, str]:
        profiles = self.context.sources.profiles()
        text, call = self._call(reflect_messages(attempts[-1].query, attempts, profiles), "reflect")
        reflection = parse_reflection(text, attempts, list(profiles))
        add_step(
            trace,
            "reflect",
            query=reflection.query,
            route=Route(choice=reflection.source, chosen_by="reflection", reason=reflection.reason),
            model_calls=[call],
            raw_output=text,
            format_error=reflection.format_error,
            subquery=SubQueryRef(id=subquery_id, preferred_source=reflection.source),  # the failed attempts are the answer steps before
        )
        return reflection.query, reflection.source

    def solve(self, trace: Trace, subquery_id: str, query: str) -> SubAnswer:
        """Route, gather and answer one sub-query, reflecting on failures."""
        source = self.gatherer.route(trace, subquery_id, query)
        attempts: list[Attempt] = []
        answers: list[SubAnswer] = []
        for attempt in range(self.params.max_reflections + 1):
            evidence = self.gatherer.gather(trace, subquery_id, query, source)
            sub = self.answer(trace, subquery_id, attempt, query, source, evidence)
            answers.append(sub)
            if sub.success:
                return sub
            attempts.append(Attempt(query=query, source=source or "all sources", answer=sub))
            if attempt == self.params.max_reflections:
                break
            query, source = self.reflect(trace, subquery_id, attempts)
        return next((a for a in reversed(answers) if a.answer), answers[-1])

    def fuse(self, trace: Trace, hops: list[Hop]) -> None:
        fallback = last_hop_answer(hops)
        trace.fallback_answer = fallback
        if len(hops) == 1 and not self.params.fuse_single_hop:
            trace.answer = fallback
            return
        text, call = self._call(fuse_messages(trace.question, hops), "fuse")
        fusion = parse_fusion(text, fallback)
        add_step(
            trace,
            "fuse",
            query=trace.question,
            answer=fusion.answer,
            reasoning=fusion.reason,
            model_calls=[call],
            raw_output=text,
            format_error=fusion.format_error,
            forced=ForcedAnswer(reader="last_hop") if fusion.used_fallback else None,
        )
        trace.answer = fusion.answer

    # ------------------------------------------------------------ the whole run

    def execute(self, trace: Trace) -> None:
        plan, ordered = self.plan(trace)
        ids = [s.id for s in plan.subqueries]
        bound: dict[str, str] = {}
        hops: list[Hop] = []
        for subquery in ordered:
            query = bind(subquery, bound, ids)
            sub = self.solve(trace, subquery.id, query)
            # an unanswered hop binds as its own question, so later queries stay searchable
            bound[subquery.id] = sub.answer or f"({query})"
            hops.append(Hop(id=subquery.id, query=query, answer=sub))
        self.fuse(trace, hops)
