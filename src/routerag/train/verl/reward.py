"""verl reward functions on :mod:`routerag.train.rewards`, reading what the agent loop recorded.

verl's reward managers hand a reward function the decoded response of each trajectory, its
``ground_truth`` and the row's ``extra_info``, into which verl's reward loop merges the agent
loop's ``extra_fields``. The agent loop (:mod:`routerag.train.verl.agent_loop`) records each
episode there as an :class:`~routerag.train.verl.agent_loop.EpisodeRecord`
(``extra_info["routerag_episode"]``: the answer, how the episode finished, every step's kind,
route, charge and format error), so the reward scores exactly the episode the environment ran —
in any tag strategy's protocol — and never re-parses the decoded text:

* ``compute_score(data_source, solution_str, ground_truth, extra_info)`` (per sample, any reward
  manager, verl's reward loop included): the registered reward ``reward`` (default ``em``, stage 1)
  of that one trajectory — a batch-level reward cannot be computed from one sample and is refused;
* ``compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos)`` (verl's
  ``batch`` reward manager): the reward over the whole batch, so that RouteRAG's stage-2
  ``accuracy_efficiency`` is centred and normalised on the batch (``1 + (t_avg - t)`` for a correct
  answer, ``t = min(cost / T, cap)``, ``T = p95 / cap``, exactly :mod:`routerag.train.rewards`).

The retrieval cost is the charge the environment recorded per search (``Step.retrieval_cost``:
RouteRAG's ``mode_cost``, passage 1, graph 3, hybrid 4), or a price table in the reward's params,
and measured retrieval wall time (``cost: wall_ms``) is recorded too. A row without the record
(a response not produced by the routerag agent loop) is refused.

Settings come as ``custom_reward_function.reward_kwargs`` (``reward``, ``params``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from routerag.train.rewards import RewardSample, answer_score, get_reward, trajectory_cost
from routerag.train.verl.agent_loop import EpisodeRecord

RECORD_KEY = "routerag_episode"  # the agent loop's extra field holding the EpisodeRecord


class VerlRewardSettings(BaseModel):
    """``custom_reward_function.reward_kwargs`` of the verl configs."""

    model_config = ConfigDict(extra="forbid")

    reward: str = Field(default="em", description="registered reward (routerag.train.rewards): em (stage 1), accuracy_efficiency (stage 2), f1, ...")
    params: dict[str, Any] = Field(default_factory=dict, description="the reward's parameters (e.g. cap, cost, metric)")


def episode_record(extra_info: Any) -> EpisodeRecord:
    """The agent loop's record of one trajectory, from the row's ``extra_info`` (at its top level,
    or under ``extra_fields`` where a verl version nests the agent loop's fields there)."""
    record = None
    if isinstance(extra_info, dict):
        nested = extra_info.get("extra_fields")
        record = extra_info.get(RECORD_KEY) or (nested.get(RECORD_KEY) if isinstance(nested, dict) else None)
    if record is None:
        raise ValueError(f"extra_info has no {RECORD_KEY!r}: the trajectory was not produced by the routerag agent loop "
                         "(actor_rollout_ref.rollout.agent with routerag.train.verl.verl_loop.RouteRAGAgentLoop)")
    return EpisodeRecord.model_validate(record)


def _golds(ground_truth: Any) -> list[str]:
    targets = ground_truth.get("target", []) if isinstance(ground_truth, dict) else ground_truth
    if targets is None:
        return []
    return [targets] if isinstance(targets, str) else [str(t) for t in targets]


def _question(extra_info: Any) -> str:
    return str(extra_info.get("question") or "") if isinstance(extra_info, dict) else ""


def score_batch(ground_truths: Sequence[Any], extra_infos: Sequence[Any], settings: VerlRewardSettings) -> list[dict[str, float]]:
    """The reward of every trajectory of the batch, with its parts for verl's logs."""
    spec = get_reward(settings.reward)
    samples = [
        RewardSample(trace=episode_record(extra).trace(_question(extra)), golds=_golds(truth))
        for truth, extra in zip(ground_truths, extra_infos, strict=True)
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
    return score_batch(list(ground_truths), extras, settings)


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                  **reward_kwargs: Any) -> dict[str, float]:
    """verl's per-sample reward function; batch-level rewards need ``compute_score_batch``."""
    settings = VerlRewardSettings.model_validate({k: v for k, v in reward_kwargs.items() if k in VerlRewardSettings.model_fields})
    if get_reward(settings.reward).batch_level:
        raise ValueError(f"reward {settings.reward!r} is normalised over the batch: use compute_score_batch with "
                         "reward_model.reward_manager=batch")
    return score_batch([ground_truth], [extra_info or {}], settings)[0]
