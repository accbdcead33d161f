"""Who makes R1-Router's knowledge-base decision at each step: the policy (its ``<ret>``, the
default) or a registered router (``routerag.routing.ROUTERS``), e.g. the no-model ``keyword``
router with an operator's rules file (``router_rules``), the yardstick a trained step policy is
read beside.

A router reads what the policy reads: the step's user prompt (``Origin question: ...``, then
``Sub-question<i>: ... / Answer<i>: ...`` for each earlier step, and any ``<image>`` marker), so a
keyword rule sees the step index in the prompt itself (``\\nSub-question2:`` holds from the third
step on) and no rule field is needed for it. Its choices are the offered knowledge bases and
:data:`STOP` (no further retrieval: the decision that ends the steps), each with its guideline as
the profile text.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from routerag.config import OMIT_AT_DEFAULT
from routerag.registry import RegisteredName
from routerag.routing import ROUTERS
from routerag.routing.base import Router, RouteResult
from routerag.routing.keyword import RouterRules, rules_fingerprint, strategy_rules
from routerag.runtime.base import StrategyContext

POLICY = "policy"  # the policy's own <ret> decides
STOP = "None"  # the route of a step that ends the decomposition
STOP_PROFILE = "no further retrieval: the origin question can be answered from the steps so far"


class StepRoutingParams(BaseModel):
    """The knowledge-base decision's parameters, shared by ``r1-router`` and ``r1-router-step``."""

    router: str = Field(
        default=POLICY, json_schema_extra=OMIT_AT_DEFAULT,
        description="who chooses each step's knowledge base (or stop): the policy's <ret> (`policy`), or a registered "
        "router over the step's prompt, e.g. `keyword` with router_rules (no model call; choices: the knowledge-base "
        "names and None for stop)",
    )
    router_rules: RouterRules | None = Field(
        default=None, json_schema_extra=OMIT_AT_DEFAULT,
        description="keyword router: its rules file (YAML: rules: [{pattern, choice}, ...], default; the choices are "
        "the knowledge-base names and None); the operator's configuration only, refused from a request",
    )

    @field_validator("router")
    @classmethod
    def _router_known(cls, value: str, info: ValidationInfo) -> str:
        """``policy`` or a registered router (a plugin only where the operator allows it)."""
        return value if value == POLICY else RegisteredName(ROUTERS).check(value, info)

    def fingerprint_inputs(self) -> dict[str, str]:
        """The keyword rules file's content hash (an edited file makes a new fingerprint)."""
        return rules_fingerprint(self.router, self.router_rules)

    @model_validator(mode="after")
    def _rules_load(self) -> StepRoutingParams:
        strategy_rules(self.router, self.router_rules)
        return self

    def routed(self) -> bool:
        """Whether a router, not the policy, makes the decision."""
        return self.router != POLICY

    def build(self, context: StrategyContext) -> Router | None:
        """The router (None: the policy decides)."""
        if not self.routed():
            return None
        from routerag.routing import RouterDeps, build_router

        return build_router(self.router, RouterDeps(context=context, rules=strategy_rules(self.router, self.router_rules)))


def step_choices(guidelines: Mapping[str, str]) -> dict[str, str]:
    """A router's choices at a step: each knowledge base with its guideline, and :data:`STOP`."""
    return {**guidelines, STOP: STOP_PROFILE}


def route_step(router: Router, prompt: str, guidelines: Mapping[str, str]) -> tuple[RouteResult, float]:
    """The router's decision over the step's prompt, and its wall milliseconds."""
    start = time.perf_counter()
    result = router.route(prompt, step_choices(guidelines))
    return result, 1000 * (time.perf_counter() - start)
