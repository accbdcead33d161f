"""The class verl instantiates: ``RouteRAGAgentLoop``, a subclass of verl's ``AgentLoopBase``.

This module imports verl only when ``RouteRAGAgentLoop`` is first looked up (module
``__getattr__``, which hydra's ``_target_`` lookup triggers), so ``import
routerag.train.verl.verl_loop`` works without verl. Everything it does besides talking to verl
is in :mod:`routerag.train.verl.agent_loop` (tested without verl).

Per sample verl calls ``run(sampling_params, **row)`` with the dataset row (``raw_prompt``,
``extra_info``, ``reward_model``, ...); every turn goes to the same rollout server
(``server_manager.generate`` with one request id: sticky sessions keep the prefix cache), with
the turn's stop strings and token limit added to the trainer's sampling parameters.
"""

from __future__ import annotations

import functools
from typing import Any
from uuid import uuid4

from routerag.train.verl.agent_loop import AgentLoopSettings, episode_output, plain, question_of, server_sampling, shared_agent

# keyword arguments verl passes to every agent loop (the rest come from the agent-loop YAML entry)
_VERL_KWARGS = ("dataset_cls", "dataset_config")
_IGNORED = ("name",)  # the entry's own name, passed along by hydra.utils.instantiate


@functools.cache
def agent_loop_class() -> type:
    """Build ``RouteRAGAgentLoop`` (imports verl)."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput

    class RouteRAGAgentLoop(AgentLoopBase):  # type: ignore[misc,valid-type]
        """RouteRAG's tag protocol as a verl agent loop (see routerag.train.verl.agent_loop)."""

        def __init__(self, trainer_config: Any, server_manager: Any, tokenizer: Any, processor: Any, **kwargs: Any) -> None:
            verl_kwargs = {k: v for k, v in kwargs.items() if k in _VERL_KWARGS}
            ours = {k: v for k, v in kwargs.items() if k not in _VERL_KWARGS and k not in _IGNORED}
            super().__init__(trainer_config, server_manager, tokenizer, processor, **verl_kwargs)
            self.response_length = int(self.config.actor_rollout_ref.rollout.response_length)
            self.settings = AgentLoopSettings.model_validate(plain(ours))
            self.agent = shared_agent(self.settings, tokenizer, self.response_length)

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
            question = question_of(kwargs)
            self.agent.check_row_prompt(question, list(kwargs.get("raw_prompt") or []))
            request_id = uuid4().hex

            async def agenerate(prompt_ids: list[int], stops: list[str], max_new: int) -> tuple[list[int], list[float] | None]:
                out = await self.server_manager.generate(
                    request_id=request_id, prompt_ids=prompt_ids, sampling_params=server_sampling(sampling_params, stops, max_new)
                )
                return list(out.token_ids), out.log_probs

            rollout = await self.agent.run(question, agenerate)
            result = episode_output(rollout, response_length=self.response_length,
                                    with_logprobs=bool(sampling_params.get("logprobs")))
            return AgentLoopOutput(
                prompt_ids=result.prompt_ids,
                response_ids=result.response_ids,
                response_mask=result.response_mask,
                response_logprobs=result.response_logprobs,
                num_turns=result.num_turns,
                metrics=AgentLoopMetrics(**result.metrics),
                extra_fields=result.extra_fields,
            )

    return RouteRAGAgentLoop


def __getattr__(name: str) -> Any:
    if name == "RouteRAGAgentLoop":
        return agent_loop_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
