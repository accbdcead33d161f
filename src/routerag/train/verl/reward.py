"""verl reward functions for RouteRAG's two stages, on :mod:`routerag.train.rewards`.

verl's reward managers hand a reward function the *decoded response* of each trajectory (model
turns and ``<information>`` observations interleaved, as the agent loop built it), its
``ground_truth`` and the row's ``extra_info``:

* ``compute_score(data_source, solution_str, ground_truth, extra_info)`` (per sample, any reward
  manager, verl's reward loop included): the registered reward ``reward`` (default ``em``, stage 1)
  of that one trajectory — a batch-level reward cannot be computed from one sample and is refused;
* ``compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos)`` (verl's
  ``batch`` reward manager): the reward over the whole batch, so that RouteRAG's stage-2
  ``accuracy_efficiency`` is centred and normalised on the batch (``1 + (t_avg - t)`` for a correct
  answer, ``t = min(cost / T, cap)``, ``T = p95 / cap``, exactly :mod:`routerag.train.rewards`).

The retrieval cost is counted from the trajectory itself (:func:`trace_of_response`): every
``<search>`` that an ``<information>`` block answered is one retrieval, its mode resolved from its
tags by RouteRAG's ``ModeRouter`` with the agent loop's ``env`` settings and priced with
``env.mode_cost`` (passage 1, graph 3, hybrid 4) — the same steps (``Step.route.mode``) and cost
(``Step.retrieval_cost``) the agent loop's environment recorded. Measured wall time is not in the text; use ``cost: mode_cost`` or ``turns``.

Settings come as ``custom_reward_function.reward_kwargs`` (``reward``, ``params``, ``env``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from routerag.protocol.routerag_tags import (
    ANSWER_CLOSE,
    ANSWER_OPEN,
    INFORMATION_CLOSE,
    INFORMATION_OPEN,
    SEARCH_OPEN,
    extract_tag,
    parse_action,
)
from routerag.strategies.routerag import ModeRouter
from routerag.trace import Route, Step, Trace
from routerag.train.env import EnvConfig
from routerag.train.rewards import UNLISTED_PRICE, RewardSample, answer_score, get_reward, trajectory_cost

_INFORMATION = re.compile(re.escape(INFORMATION_OPEN) + r".*?" + re.escape(INFORMATION_CLOSE), re.DOTALL | re.IGNORECASE)
_ASSISTANT = "<|im_start|>assistant"


class VerlRewardSettings(BaseModel):
    """``custom_reward_function.reward_kwargs`` of the verl configs."""

    model_config = ConfigDict(extra="forbid")

    reward: str = Field(default="em", description="registered reward (routerag.train.rewards): em (stage 1), accuracy_efficiency (stage 2), f1, ...")
    params: dict[str, Any] = Field(default_factory=dict, description="the reward's parameters (e.g. cap, cost, metric)")
    env: EnvConfig = Field(default_factory=EnvConfig, description="the agent loop's env settings: modes, default mode, mode_cost")


def trace_of_response(response: str, question: str = "", env: EnvConfig | None = None) -> Trace:
    """The search steps and the answer of one decoded trajectory.

    A search counts when an ``<information>`` block follows it (the environment retrieved); the
    search is the last ``<search>`` before that block (earlier ones in the same stretch were
    invalid actions that got no observation). The answer is the last ``<answer>`` (up to its
    closing tag, or to the end for an answer the budget cut)."""
    env = env or EnvConfig()
    if _ASSISTANT in response:
        response = response.split(_ASSISTANT, 1)[1]
    router = ModeRouter(env.routing_params(), question)
    trace = Trace(question=question, strategy="routerag")
    start = 0
    for block in _INFORMATION.finditer(response):
        turn = response[start : block.start()]
        start = block.end()
        at = turn.lower().rfind(SEARCH_OPEN)
        if at < 0:
            continue
        action = parse_action(turn[at:])
        if action.kind != "search":
            continue
        plan = router(action, question)
        mode = plan.mode or env.default_mode
        route = plan.route or Route(choice=plan.sources[0] if plan.sources else mode, chosen_by="default")
        trace.add(Step(index=len(trace.steps), kind="search", query=plan.query, sources=list(plan.sources),
                       route=route.model_copy(update={"mode": mode}),
                       retrieval_cost=env.mode_cost.get(mode, UNLISTED_PRICE)))
    answer = extract_tag(response[start:], ANSWER_OPEN, ANSWER_CLOSE, last=True)
    trace.answer = (answer or "").strip()
    trace.add(Step(index=len(trace.steps), kind="answer", answer=trace.answer))
    return trace


def _golds(ground_truth: Any) -> list[str]:
    targets = ground_truth.get("target", []) if isinstance(ground_truth, dict) else ground_truth
    if targets is None:
        return []
    return [targets] if isinstance(targets, str) else [str(t) for t in targets]


def _question(extra_info: Any) -> str:
    return str(extra_info.get("question") or "") if isinstance(extra_info, dict) else ""


def score_batch(responses: Sequence[str], ground_truths: Sequence[Any], extra_infos: Sequence[Any],
                settings: VerlRewardSettings) -> list[dict[str, float]]:
    """The reward of every trajectory of the batch, with its parts for verl's logs."""
    spec = get_reward(settings.reward)
    samples = [
        RewardSample(trace=trace_of_response(text, _question(extra), settings.env), golds=_golds(truth))
        for text, truth, extra in zip(responses, ground_truths, extra_infos, strict=True)
    ]
    scores = spec(samples, settings.params)
    metric = str(settings.params.get("metric", "em"))
    cost_signal = settings.params.get("cost", "mode_cost")
    prices = settings.params.get("mode_cost")
    return [
        {
            "score": score,
            "acc": answer_score(s, metric),
            "retrieval_turns": float(s.trace.retrieval_turns),
            "retrieval_cost": trajectory_cost(s.trace, cost_signal, prices),
        }
        for s, score in zip(samples, scores)
    ]


def compute_score_batch(data_sources: Sequence[str], solution_strs: Sequence[str], ground_truths: Sequence[Any],
                        extra_infos: Sequence[Any] | None = None, **reward_kwargs: Any) -> list[dict[str, float]]:
    """verl ``batch`` reward manager's function (``custom_reward_function.name=compute_score_batch``)."""
    settings = VerlRewardSettings.model_validate(reward_kwargs)
    extras = list(extra_infos) if extra_infos is not None else [{} for _ in solution_strs]
    return score_batch(list(solution_strs), list(ground_truths), extras, settings)


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                  **reward_kwargs: Any) -> dict[str, float]:
    """verl's per-sample reward function; batch-level rewards need ``compute_score_batch``."""
    settings = VerlRewardSettings.model_validate({k: v for k, v in reward_kwargs.items() if k in VerlRewardSettings.model_fields})
    if get_reward(settings.reward).batch_level:
        raise ValueError(f"reward {settings.reward!r} is normalised over the batch: use compute_score_batch with "
                         "reward_model.reward_manager=batch")
    return score_batch([solution_str], [ground_truth], [extra_info or {}], settings)[0]
