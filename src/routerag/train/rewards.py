"""Rewards: named, registered, pure functions of traces (and of the batch, for batch-level centring).

Every reward has the signature ``fn(samples, params) -> list[float]``: ``samples`` is the batch of
:class:`RewardSample` (a :class:`~routerag.trace.Trace` plus its gold answers and any per-sample
gold the reward needs in ``extra``) and ``params`` the reward's typed parameters. Rewards never
print and never touch a model; answer scores come from :mod:`routerag.eval.metrics`, the module
the evaluation tables use.

=======================  ==================================================================
``em``                   exact match of the trace's answer (RouteRAG stage 1)
``f1``                   token F1 of the answer
``format``               ``score`` (0.5) when the episode followed the protocol
``accuracy_efficiency``  RouteRAG stage 2: correct -> 1 + (t_avg - t) / T, wrong -> 0;
                         t the trajectory's retrieval cost, t_avg the batch mean
``pra``                  GraphRAG-R1 Progressive Retrieval Attenuation: R_n = R_{n-1} + R0 k^(n-1)
                         (paper: R0 0.5, k 1, at most 8 retrievals counted)
``caf``                  GraphRAG-R1 Cost-Aware F1: F1 * a * exp(-b N) (paper: a 2, b 0.1)
``r1_router_step``       R1-Router Step-GRPO: per-step reward gated by format
=======================  ==================================================================

A :class:`RewardSchedule` holds the training stages (RouteRAG's switch step, GraphRAG-R1's
phases), each a weighted sum of rewards; :meth:`RewardSchedule.score` returns the total and every
component so that each is logged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from routerag.config import validation_reasons
from routerag.eval.metrics import METRICS, f1_recall, token_f1
from routerag.protocol.routerag_tags import DEFAULT_MODE_COST as DEFAULT_MODE_COST  # the prices live with the modes
from routerag.protocol.routerag_tags import THINK_CLOSE, THINK_OPEN
from routerag.protocol.routerag_tags import UNLISTED_PRICE as UNLISTED_PRICE
from routerag.registry import RegisteredName, Registry, instances_of
from routerag.trace import Step, Trace


class RewardSample(BaseModel):
    """One trajectory to score."""

    trace: Trace
    golds: list[str] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)  # per-sample gold for step rewards (R1-Router)


RewardFn = Callable[[Sequence[RewardSample], Any], list[float]]


@dataclass(frozen=True)
class RewardSpec:
    name: str
    fn: RewardFn
    Params: type[BaseModel]
    description: str
    batch_level: bool = False  # the value of one sample depends on the rest of the batch

    def __call__(self, samples: Sequence[RewardSample], params: BaseModel | dict[str, Any] | None = None) -> list[float]:
        if params is None:
            resolved = self.Params()
        elif isinstance(params, BaseModel):
            resolved = params
        else:
            resolved = self.Params.model_validate(params)
        return [float(x) for x in self.fn(samples, resolved)]


REWARDS: Registry[RewardSpec] = Registry("reward", instances_of(RewardSpec))
"""Registered rewards; a plugin reward is a :class:`RewardSpec` named ``"pkg.mod:attr"`` in a schedule."""

MetricName = Annotated[str, RegisteredName(METRICS)]


def register_reward(name: str, Params: type[BaseModel], description: str, *, batch_level: bool = False):
    """Decorator registering ``fn(samples, params)`` as reward ``name``."""

    def _wrap(fn: RewardFn) -> RewardFn:
        REWARDS.register(name, RewardSpec(name, fn, Params, description, batch_level))
        return fn

    return _wrap


def get_reward(name: str) -> RewardSpec:
    return REWARDS.get(name)


# ---------------------------------------------------------------- helpers on traces


def answered(trace: Trace) -> bool:
    """The episode produced a non-empty answer and did not fail."""
    return trace.error is None and bool(trace.answer.strip())


def answer_score(sample: RewardSample, metric: str = "em") -> float:
    if not answered(sample.trace) or not sample.golds:
        return 0.0
    return float(METRICS.get(metric)(sample.trace.answer, sample.golds))


def followed_protocol(trace: Trace) -> bool:
    """Every turn parsed without a format error and the policy itself closed an answer (not the
    forced-answer cue, not truncation)."""
    if trace.error is not None or not trace.steps:
        return False
    last = trace.steps[-1]
    if last.kind != "answer" or last.forced is not None:
        return False
    return all(step.format_error is None for step in trace.steps)


CostSignal = Literal["mode_cost", "wall_ms", "turns"]

def search_price(step: Step, prices: dict[str, float]) -> float:
    """The price of one search step under ``prices``: its routed mode's (``step.route.mode``), or,
    for a search not routed by mode, the sum over the sources it queried (a mode is the name of the
    source serving it; a call to three sources costs three prices). Unlisted names cost
    :data:`UNLISTED_PRICE`."""
    if step.route is not None and step.route.mode is not None:
        return float(prices.get(step.route.mode, UNLISTED_PRICE))
    return float(sum(prices.get(name, UNLISTED_PRICE) for name in step.sources))


def trajectory_cost(trace: Trace, signal: CostSignal = "mode_cost", mode_cost: dict[str, float] | None = None) -> float:
    """Retrieval cost of one trajectory: measured wall time (ms), the number of retrieval turns,
    or the sum of deterministic per-call prices.

    Prices: with a table ``mode_cost``, every search step is priced by it (:func:`search_price`).
    Without one, a step costs what the training environment charged (``Step.retrieval_cost``); a
    step with no recorded charge — any trace not made by the environment (evaluation, the server) —
    is priced by :data:`DEFAULT_MODE_COST`, the environment's default table, so the same search costs
    the same in both."""
    steps = trace.search_steps
    if signal == "wall_ms":
        return float(sum(s.retrieval_ms for s in steps))
    if signal == "turns":
        return float(len(steps))
    total = 0.0
    for s in steps:
        if mode_cost is None and s.retrieval_cost is not None:
            total += s.retrieval_cost
        else:
            total += search_price(s, DEFAULT_MODE_COST if mode_cost is None else mode_cost)
    return total


# ---------------------------------------------------------------- outcome rewards


class AnswerParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metric: MetricName = Field(default="em", description="answer metric from routerag.eval.metrics.METRICS")


@register_reward("em", AnswerParams, "exact match of the final answer (RouteRAG stage 1; Search-R1 outcome reward)")
def em_reward(samples: Sequence[RewardSample], params: AnswerParams) -> list[float]:
    return [answer_score(s, params.metric) for s in samples]


class F1Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


@register_reward("f1", F1Params, "token F1 of the final answer")
def f1_reward(samples: Sequence[RewardSample], params: F1Params) -> list[float]:
    return [answer_score(s, "f1") for s in samples]


class FormatParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    score: float = Field(default=0.5, description="reward when the protocol is followed (R1-Searcher/GraphRAG-R1 use 0.5)")
    penalty: float = Field(default=0.0, description="reward when it is not (R1-Searcher stage 2 subtracts 2; 0 keeps it non-negative)")


@register_reward("format", FormatParams, "score when every turn parsed and the policy closed its own answer")
def format_reward(samples: Sequence[RewardSample], params: FormatParams) -> list[float]:
    return [params.score if followed_protocol(s.trace) else params.penalty for s in samples]


# ---------------------------------------------------------------- RouteRAG stage 2


class AccuracyEfficiencyParams(BaseModel):
    """RouteRAG stage 2. The released code scales each cost as ``s = min(t * cap / p95(t), cap)``
    with cap 0.5 (``T = p95 / cap``) and adds ``mean(s) - s_i`` to the reward of a correct answer."""

    model_config = ConfigDict(extra="forbid")
    metric: MetricName = Field(default="em", description="what 'correct' means (an answer metric; correct when >= threshold)")
    threshold: float = Field(default=1.0, ge=0.0, le=1.0, description="metric value counted as correct")
    cost: CostSignal = Field(default="mode_cost", description="cost signal: deterministic per-mode cost, measured wall time, or turns")
    mode_cost: dict[str, float] | None = Field(default=None, description="per-mode prices; None uses those recorded by the environment")
    normaliser: Literal["p95", "fixed"] = Field(default="p95", description="T from the batch's 95th percentile (release) or a fixed T")
    T: float = Field(default=1.0, gt=0.0, description="fixed normaliser (with normaliser='fixed'), in units of the cost signal")
    cap: float = Field(default=0.5, gt=0.0, description="largest scaled cost; with p95, T = p95 / cap (release: 0.5)")
    wrong: float = Field(default=0.0, description="reward of a wrong answer (release: format_score = 0)")


def scaled_costs(costs: Sequence[float], params: AccuracyEfficiencyParams) -> list[float]:
    """Each cost divided by T and clipped at ``cap``; all zeros when the batch is degenerate
    (empty, or a non-positive normaliser such as a batch that never retrieved)."""
    if not costs:
        return []
    if params.normaliser == "p95":
        p95 = float(np.percentile(np.asarray(costs, dtype=np.float64), 95))
        if not math.isfinite(p95) or p95 <= 0.0:
            return [0.0] * len(costs)
        T = p95 / params.cap
    else:
        T = params.T
    return [min(max(c, 0.0) / T, params.cap) for c in costs]


@register_reward(
    "accuracy_efficiency", AccuracyEfficiencyParams,
    "RouteRAG stage 2: correct -> 1 + (t_avg - t)/T over the batch, wrong -> 0", batch_level=True,
)
def accuracy_efficiency_reward(samples: Sequence[RewardSample], params: AccuracyEfficiencyParams) -> list[float]:
    costs = [trajectory_cost(s.trace, params.cost, params.mode_cost) for s in samples]
    scaled = scaled_costs(costs, params)
    t_avg = float(np.mean(scaled)) if scaled else 0.0
    out = []
    for s, t in zip(samples, scaled):
        correct = answer_score(s, params.metric) >= params.threshold
        out.append(1.0 + (t_avg - t) if correct else params.wrong)
    return out


# ---------------------------------------------------------------- GraphRAG-R1


class PRAParams(BaseModel):
    """Progressive Retrieval Attenuation: the n-th retrieval adds ``R0 * k**(n-1)``, so
    ``R_n = R0 (1 - k**n) / (1 - k)`` for ``k < 1``, bounded by ``R0 / (1 - k)``: early retrievals
    are encouraged, each further one is worth less. The defaults are the paper's stage-2 constants
    (GraphRAG-R1, section 4.1.4: R0 = 0.5, k = 1, retrievals capped at 8); with ``k = 1`` PRA is the
    plain count ``n * R0`` up to the cap, as the paper notes."""

    model_config = ConfigDict(extra="forbid")
    R0: float = Field(default=0.5, ge=0.0, description="reward of the first retrieval (paper: 0.5)")
    k: float = Field(default=1.0, gt=0.0, le=1.0,
                     description="attenuation factor per further retrieval (paper: 1, no attenuation; our earlier default: 0.5)")
    max_calls: int | None = Field(default=8, ge=0,
                                  description="retrievals beyond this count add nothing (paper: 8; our earlier default: None, no limit)")


def pra_value(n: int, R0: float, k: float) -> float:
    """``R_n`` of the recursion ``R_0 = 0``, ``R_n = R_{n-1} + R0 * k**(n-1)``."""
    total = 0.0
    for i in range(1, n + 1):
        total += R0 * k ** (i - 1)
    return total


@register_reward("pra", PRAParams, "GraphRAG-R1 Progressive Retrieval Attenuation over the retrieval count")
def pra_reward(samples: Sequence[RewardSample], params: PRAParams) -> list[float]:
    out = []
    for s in samples:
        n = s.trace.retrieval_turns
        if params.max_calls is not None:
            n = min(n, params.max_calls)
        out.append(pra_value(n, params.R0, params.k))
    return out


class CAFParams(BaseModel):
    """Cost-Aware F1: ``F1 * a * exp(-b * N)`` with N the retrieval count. The defaults are the
    paper's stage-3 constants (GraphRAG-R1, section 4.1.4: a = 2, b = 0.1)."""

    model_config = ConfigDict(extra="forbid")
    a: float = Field(default=2.0, gt=0.0, description="scale of the F1 term (paper: 2; our earlier default: 1)")
    b: float = Field(default=0.1, ge=0.0, description="exponential price of one retrieval (paper: 0.1)")
    cost: CostSignal = Field(default="turns", description="N: retrieval turns (paper) or another cost signal")


@register_reward("caf", CAFParams, "GraphRAG-R1 Cost-Aware F1: F1 * a * exp(-b N)")
def caf_reward(samples: Sequence[RewardSample], params: CAFParams) -> list[float]:
    return [
        answer_score(s, "f1") * params.a * math.exp(-params.b * trajectory_cost(s.trace, params.cost))
        for s in samples
    ]


# ---------------------------------------------------------------- R1-Router Step-GRPO


class R1RouterStepRewardParams(BaseModel):
    """Per-step reward of R1-Router's Step-GRPO. A sample is one step (its trace holds one model
    output in ``trace.segments``); ``extra['step_type']`` is ``ret`` (decompose + route),
    ``ans`` (intermediate answer) or ``final``, with the step's gold in ``extra``
    (``gold_query``, ``gold_retriever``, ``gold_answer``). A malformed output scores 0 (format
    gate); else ``ret`` -> w_query * sim(sub-question, gold) + w_route * [retriever == gold];
    ``ans`` -> F1-recall of the intermediate answer; ``final`` -> the final-answer metric."""

    model_config = ConfigDict(extra="forbid")
    w_query: float = Field(default=0.5, ge=0.0, description="weight of sub-question similarity in a ret step")
    w_route: float = Field(default=0.5, ge=0.0, description="weight of choosing the gold knowledge base in a ret step")
    similarity: Literal["embedding", "token_f1"] = Field(
        default="embedding", description="sub-question similarity: cosine of the bundled sentence embedder, or token F1 (no model)"
    )
    final_metric: MetricName = Field(default="cover_em", description="metric of the final answer (accuracy)")
    retrievers: list[str] = Field(
        default_factory=lambda: ["Text Retriever", "Text Image Retriever", "Table Retriever"],
        description="knowledge-base names the policy may choose",
    )


def _model_output(trace: Trace) -> str:
    return "".join(seg.text for seg in trace.segments if seg.kind == "model")


def _sub_question_similarity(pred: str, gold: str, how: str) -> float:
    if not pred.strip() or not gold.strip():
        return float(pred.strip().lower() == gold.strip().lower())
    if how == "token_f1":
        return token_f1(pred, gold)
    from routerag.eval.metrics import semantic_similarity

    return max(0.0, semantic_similarity(pred, gold))


def r1_router_step_components(sample: RewardSample, params: R1RouterStepRewardParams) -> dict[str, float]:
    """The components of one step's reward (``format`` is the gate)."""
    from routerag.runtime.parsing import extract_tag, match_name, tagged_answer

    text = _model_output(sample.trace)
    kind = sample.extra.get("step_type", "final")
    if kind == "ret":
        sub = extract_tag(text, "<sub-question>", "</sub-question>")
        ret = extract_tag(text, "<ret>", "</ret>")
        ok = sub is not None and ret is not None and "</sub-question>" in text and "</ret>" in text
        gold_q = str(sample.extra.get("gold_query", ""))
        gold_r = str(sample.extra.get("gold_retriever", ""))
        sub_text = " ".join((sub or "").split())
        if sub_text.strip(".'\" ").lower() in {"none", ""}:
            sub_text = "none"
        names = [*params.retrievers, "None"]
        chosen = match_name(ret or "", names) if ret is not None else None
        gold_name = match_name(gold_r, names) if gold_r else None
        sim = _sub_question_similarity(sub_text, gold_q, params.similarity)
        route = float(chosen is not None and gold_name is not None and chosen.lower() == gold_name.lower())
        return {"format": float(ok), "query_similarity": sim, "routing": route}
    answer, errors = tagged_answer(text)
    ok = not errors and THINK_OPEN in text and THINK_CLOSE in text
    golds = sample.golds or [str(sample.extra.get("gold_answer", ""))]
    if kind == "ans":
        return {"format": float(ok), "f1_recall": f1_recall(answer, golds) if answer else 0.0}
    return {"format": float(ok), "accuracy": float(METRICS.get(params.final_metric)(answer, golds)) if answer else 0.0}


@register_reward("r1_router_step", R1RouterStepRewardParams, "R1-Router Step-GRPO step reward gated by format")
def r1_router_step_reward(samples: Sequence[RewardSample], params: R1RouterStepRewardParams) -> list[float]:
    out = []
    for s in samples:
        c = r1_router_step_components(s, params)
        if not c["format"]:
            out.append(0.0)
        elif "routing" in c:
            out.append(params.w_query * c["query_similarity"] + params.w_route * c["routing"])
        else:
            out.append(c.get("f1_recall", c.get("accuracy", 0.0)))
    return out


# ---------------------------------------------------------------- schedules


class WeightedReward(BaseModel):
    """A reward in a stage. Its ``params`` are checked against the reward's ``Params`` when the
    configuration is validated (a bad parameter fails at load, before any model is built); the
    validated model is :attr:`resolved`, while ``params`` keeps what was written (the resolved
    configuration a run stores is unchanged)."""

    model_config = ConfigDict(extra="forbid")
    name: Annotated[str, RegisteredName(REWARDS, unknown_name=True)] = Field(description="registered reward name, or a plugin's 'pkg.mod:attr'")
    weight: float = Field(default=1.0, description="weight in the stage's sum")
    params: dict[str, Any] = Field(default_factory=dict, description="the reward's parameters")
    _resolved: BaseModel = PrivateAttr()

    @model_validator(mode="after")
    def _resolve_params(self) -> WeightedReward:
        try:
            self._resolved = get_reward(self.name).Params.model_validate(self.params)
        except ValidationError as exc:
            raise ValueError(f"invalid params for reward {self.name!r}: {validation_reasons(exc)}") from None
        return self

    @property
    def resolved(self) -> BaseModel:
        """``params`` validated by the reward's ``Params``."""
        return self._resolved


class Stage(BaseModel):
    """One training stage: from the previous stage's end up to ``until_step`` (inclusive; None =
    to the end), the reward is the weighted sum of ``rewards``."""

    model_config = ConfigDict(extra="forbid")
    name: str
    until_step: int | None = Field(default=None, ge=0, description="last global step of this stage (None: open-ended)")
    rewards: list[WeightedReward] = Field(min_length=1)


class RewardBreakdown(BaseModel):
    stage: str
    total: list[float]
    components: dict[str, list[float]]  # unweighted values per reward name


class RewardSchedule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    stages: list[Stage] = Field(min_length=1)

    def stage_at(self, step: int) -> Stage:
        """The stage active at ``step`` (1-based global step; RouteRAG: step <= switch -> stage 1)."""
        for stage in self.stages:
            if stage.until_step is None or step <= stage.until_step:
                return stage
        return self.stages[-1]

    def reward_names(self) -> list[str]:
        return list(dict.fromkeys(r.name for st in self.stages for r in st.rewards))

    def score(self, samples: Sequence[RewardSample], step: int) -> RewardBreakdown:
        stage = self.stage_at(step)
        components: dict[str, list[float]] = {}
        total = [0.0] * len(samples)
        for wr in stage.rewards:
            values = get_reward(wr.name)(samples, wr.resolved)
            components[wr.name] = values
            total = [t + wr.weight * v for t, v in zip(total, values)]
        return RewardBreakdown(stage=stage.name, total=total, components=components)


def two_stage_schedule(switch_step: int = 20, **efficiency: Any) -> RewardSchedule:
    """RouteRAG: EM through ``switch_step`` (release: 20 of 40), then accuracy–efficiency."""
    return RewardSchedule(stages=[
        Stage(name="outcome", until_step=switch_step, rewards=[WeightedReward(name="em")]),
        Stage(name="efficiency", rewards=[WeightedReward(name="accuracy_efficiency", params=efficiency)]),
    ])


def graphrag_r1_schedule(pra_until: int = 50, pra: dict[str, Any] | None = None, caf: dict[str, Any] | None = None) -> RewardSchedule:
    """GraphRAG-R1's RL phases after the SFT cold start: format + PRA, then format + CAF."""
    return RewardSchedule(stages=[
        Stage(name="behaviour", until_step=pra_until,
              rewards=[WeightedReward(name="format"), WeightedReward(name="pra", params=pra or {})]),
        Stage(name="smartness", rewards=[WeightedReward(name="format"), WeightedReward(name="caf", params=caf or {})]),
    ])
