"""Adaptive-RAG (Jeong et al., 2024): per question, a classifier picks how much retrieval to do -
no model at all (``rule``: the answer the question's own form gives, for yes/no and "X or Y?"
questions), no retrieval (``direct``), one step (``vanilla``) or the multi-step strategy
(``routerag`` with the shipped policy, or ``ircot``) - and that strategy answers.

The classifier is a router of :mod:`routerag.routing` (default ``learned``: the strategy model
trained on strategy labels from outcomes, :mod:`routerag.train.router.strategy_labels`; cost-aware with
``router_margin``), asked to rank the choices of ``strategies`` (choice label -> registered
strategy). The trace starts with a ``route`` step holding the choice, the strategy run and every
choice's score; the chosen strategy's steps, transcript and answer follow.

The choices' strategies are resolved through the context's resolver (``StrategyContext.resolve``:
the front door, ``routerag.api``, injects its own, so they get its validation and defaults; the
strategies layer never imports the front door, which sits above it). Their steps join this trace
as they happen (so a step observer sees them live), renumbered after the route step.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, model_validator

from routerag.config import FILE_CONTENT, OMIT_AT_DEFAULT, validation_reasons
from routerag.llm.config import AdapterPath
from routerag.registry import RegisteredName
from routerag.routing import ROUTERS, RouterModel
from routerag.routing.keyword import RouterRules, rules_fingerprint, strategy_rules
from routerag.runtime.base import STRATEGIES, Strategy, StrategyContext, registry_resolver
from routerag.runtime.loop import LoopStrategy, add_step
from routerag.trace import Step, Trace

# ``rule`` (the no-model yardstick) is not a default choice: it answers a user's yes/no question "yes"
# without looking. Add it (``strategies: {rule: rule, ...}``) only to compare with published numbers.
DEFAULT_STRATEGIES = {"direct": "direct", "vanilla": "vanilla", "routerag": "routerag"}


class AdaptiveParams(BaseModel):
    strategies: dict[str, Annotated[str, RegisteredName(STRATEGIES)]] = Field(
        default_factory=lambda: dict(DEFAULT_STRATEGIES), min_length=2,
        description="the router's choices (its labels) -> the registered strategy each one runs",
    )
    strategy_params: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="per choice, parameters of its strategy (checked by that strategy)",
    )
    router: Annotated[str, RegisteredName(ROUTERS)] = Field(
        default="learned", description="registered router (routerag.routing), or a plugin's pkg.mod:factory, that picks the strategy"
    )
    router_model: RouterModel | None = Field(
        default=None, description="learned router: a shipped router's name or a model folder (default: the shipped one "
        "whose labels cover the choices)",
    )
    router_margin: float = Field(
        default=0.0, ge=0.0, le=1.0,
        description="learned router: the cheapest strategy whose predicted success is within this margin of the best",
    )
    router_rules: RouterRules | None = Field(
        default=None, json_schema_extra=OMIT_AT_DEFAULT,
        description="keyword router: its rules file (YAML: rules: [{pattern, choice}, ...], default; the choices are "
        "the strategies' labels); the operator's configuration only, refused from a request",
    )
    adapters: dict[str, AdapterPath] = Field(
        default_factory=dict, json_schema_extra={**OMIT_AT_DEFAULT, **FILE_CONTENT},
        description="per choice, a llama.cpp LoRA adapter GGUF (or policy:NAME, a shipped one) its strategy runs with "
        "(the run's model configuration with that adapter, loaded on the first question that chooses it): e.g. "
        "routerag's trained policy beside direct and vanilla on the base model; the others run on the run's model",
    )

    def fingerprint_inputs(self) -> dict[str, str]:
        """The learned router's weights (its name alone does not decide the choices: a shipped
        router can be retrained)."""
        if self.router != "learned":
            return rules_fingerprint(self.router, self.router_rules)
        from routerag.routing.learned import model_fingerprint

        return {"router_model": model_fingerprint(self.router_model, list(self.strategies))}

    @model_validator(mode="after")
    def _known(self, info: ValidationInfo) -> AdaptiveParams:
        for choice, name in self.strategies.items():
            if name == "adaptive":
                raise ValueError(f"choice {choice!r}: adaptive cannot run itself")
        for field in ("strategy_params", "adapters"):
            extra = sorted(set(getattr(self, field)) - set(self.strategies))
            if extra:
                raise ValueError(f"{field} for unknown choices {extra}; choices: {sorted(self.strategies)}")
        rules = strategy_rules(self.router, self.router_rules)
        if rules is not None:
            rules.check_choices(list(self.strategies))
        for choice, params in self.strategy_params.items():
            _check_choice_params(choice, self.strategies[choice], params, info.context)
        return self


def _check_choice_params(choice: str, name: str, params: dict[str, Any], context: Any) -> None:
    """A choice's params, validated by its strategy now (in the same validation context: a
    request's params name no more than the request may), so that what they name is refused
    before anything runs; the strategy validates them again, as its caller does, when it is built."""
    try:
        cls = STRATEGIES.get(name)
    except ImportError:  # an optional dependency is missing: reported when the strategy is built
        return
    try:
        cls.Params.model_validate(params, context=context)
    except ValidationError as exc:
        raise ValueError(f"strategy_params.{choice} ({name}): {validation_reasons(exc)}") from None


class Adaptive(LoopStrategy):
    name: ClassVar[str] = "adaptive"
    # 1: ``rule`` among the default choices, and the shipped strategy router retrained over the four
    # (features v2, the question's answer form); revision-0 runs are in docs/results/runs-rev0
    # 2: ``rule`` out of the default choices (the router picks among direct, vanilla, routerag);
    # revision-1 runs are in docs/results/runs-rev1
    revision: ClassVar[int] = 2
    Params: ClassVar[type[BaseModel]] = AdaptiveParams
    params: AdaptiveParams

    def __init__(self, context: StrategyContext, params: BaseModel | dict[str, Any] | None = None) -> None:
        super().__init__(context, params)
        from routerag.routing import RouterDeps, build_router

        p = self.params
        self.router = build_router(p.router, RouterDeps(context=context, model=p.router_model, margin=p.router_margin,
                                                        rules=strategy_rules(p.router, p.router_rules)))
        # each choice's strategy is built once (its parameters checked now, not at the first question);
        # their steps go to the trace this strategy is filling (per thread: one instance may serve several)
        self._filling = threading.local()
        resolve = context.resolve or registry_resolver
        sub_context = replace(context, on_step=self._join)
        self.runners: dict[str, Strategy] = {}
        for choice, name in p.strategies.items():
            params = p.strategy_params.get(choice)
            adapter = p.adapters.get(choice)
            self.runners[choice] = (resolve(name, params, sub_context) if adapter is None
                                    else resolve(name, params, sub_context, adapter=adapter))

    def _join(self, step: Step) -> None:
        """A chosen strategy's step, appended to this run's trace as it happens (renumbered)."""
        self._join_to(self._filling.trace, step)

    @staticmethod
    def _join_to(trace: Trace, step: Step) -> None:
        trace.add(step.model_copy(update={"index": len(trace.steps)}))

    def execute(self, trace: Trace) -> None:
        p = self.params
        from routerag.routing.across import route_choices

        result = route_choices(self.router, trace.question, {c: "" for c in p.strategies})
        choice = result.choice
        latency = sum(c.latency_ms for c in result.model_calls)
        # the label's strategy and its params are the run's (trace.params: strategies, strategy_params)
        add_step(trace, "route", route=result.as_route(self.router.name),
                 model_calls=result.model_calls, latency_ms=latency, format_error=result.format_error,
                 raw_output=result.raw_output or "")
        before = len(trace.steps)
        self._filling.trace = trace
        try:
            sub = self.runners[choice].run(trace.question)
        finally:
            self._filling.trace = None
        for step in sub.steps[len(trace.steps) - before :]:  # a strategy that filled its trace without Trace.add
            self._join_to(trace, step)
        trace.segments = sub.segments
        trace.answer = sub.answer
        trace.fallback_answer = sub.fallback_answer
        trace.error, trace.error_kind = sub.error, sub.error_kind
