"""The rollout environment: one multi-turn episode of a tag strategy over token ids,
trainer-independent.

The environment takes a strategy name and that strategy's Params (:class:`EnvConfig`) and asks
the strategy for its episode (:meth:`~routerag.strategies.agentic.TagStrategy.episode`: the
rules, the prompt messages), the same function its evaluation runs; the one episode engine
(:mod:`routerag.episode.engine`) then runs that episode through its token port
(:class:`~routerag.episode.ports.TokenPolicy`): the same parser, the same recoveries, the same
forced answer and step records as the evaluated strategy, so a policy is evaluated under exactly
the rules it was trained with (``routerag``, its presets and ``graphrag-r1``, each in its own tag
protocol). This module adds what only training needs: the token limits of the port, the prompt
over a tokenizer's chat template and the episode's cost.

The policy is any ``generate(prompt_ids, stop_strings, max_new_tokens) -> (completion_ids,
logprobs)`` callable. The result is a :class:`Rollout`: ``prompt_ids``, ``completion_ids`` (model
and observation tokens interleaved), ``env_mask`` (1 = the policy's own token, 0 = inserted by the
environment: evidence, repairs, the forced-answer cue), ``logprobs`` (0 for observation tokens),
the :class:`~routerag.trace.Trace` (steps, segments, answer) and the episode's cost (retrieval
turns, measured retrieval wall time, deterministic per-mode cost).

Every token the policy sampled is kept, even text after the first closing tag of a turn (the
chat port drops it from its transcript): the loss must see exactly the sampled sequence.
This module does not import any trainer library (no TRL, no torch).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from routerag.corpus.schema import Question
from routerag.episode.engine import EpisodeSetup, run_episode
from routerag.episode.ports import Generate as Generate
from routerag.episode.ports import TokenCodec as TokenCodec
from routerag.episode.ports import TokenPolicy
from routerag.episode.ports import cut_observation as cut_observation
from routerag.llm.base import Message
from routerag.protocol.routerag_tags import DEFAULT_MODE_COST as DEFAULT_MODE_COST
from routerag.protocol.routerag_tags import parse_action as parse_action  # the parser the engine runs here
from routerag.registry import UnknownNameError
from routerag.runtime.base import StrategyContext
from routerag.runtime.loop import question_parts
from routerag.sources.sourceset import SourceSet
from routerag.strategies.agentic import TagStrategy, tag_strategy
from routerag.trace import Trace
from routerag.train.rewards import search_price

P = TypeVar("P", bound=BaseModel)


class HFCodec:
    """A :class:`TokenCodec` over a transformers tokenizer: no special tokens added on encode;
    the prompt is rendered with the tokenizer's chat template (one user turn, generation prompt
    added) when it has one and ``chat_template`` is true, else used as plain text."""

    def __init__(self, tokenizer: Any, *, chat_template: bool = True) -> None:
        self.tokenizer = tokenizer
        self.chat_template = chat_template and bool(getattr(tokenizer, "chat_template", None))

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def render_prompt(self, user_text: str) -> str:
        return self.render_messages([Message(role="user", content=user_text)])

    def render_messages(self, messages: Sequence[Message]) -> str:
        """Prompt messages (system, user) as the policy sees them: through the chat template with
        the generation prompt added, or, without one, their texts joined by blank lines (as the
        chat port joins them)."""
        if not self.chat_template:
            return "\n\n".join(m.content for m in messages)
        return self.tokenizer.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in messages], tokenize=False, add_generation_prompt=True
        )


class EnvConfig(BaseModel):
    """One episode of the rollout environment: a tag strategy and its Params (the episode's rules,
    exactly as evaluation runs them), plus the limits of the token port.

    The flat form of configs written before the strategy was named (``env: {k: 3, max_turns: 4,
    allowed_modes: [passage]}``) still loads: keys that are not fields here are the strategy's
    Params, and override ``params`` (so ``--set env.k=5`` works on either form)."""

    model_config = ConfigDict(extra="forbid")

    strategy: str = Field(
        default="routerag",
        description="the tag strategy whose episode is run (routerag, its presets such as routerag-passage, graphrag-r1); "
        "evaluate a policy trained here with the same strategy and params",
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="the strategy's Params (docs/guides/strategies.md): budget, k, modes, prompt, assistant_prefix, "
        "strict_modes, reader, mode_cost, ...; also accepted flat, beside the fields here",
    )
    max_new_tokens_per_turn: int = Field(default=256, ge=1, le=8192, description="generation limit of one policy turn")
    max_completion_tokens: int = Field(
        default=1024, ge=1, le=65536, description="limit on the whole completion (model + observation tokens); the episode is cut when reached"
    )
    max_observation_tokens: int = Field(
        default=512, ge=16, le=16384,
        description="evidence is cut to this many tokens (Search-R1's max_obs_length=500), inside its block so that the "
        "closing tag stays; evaluation cuts none, so set it above the usual observation length",
    )

    @model_validator(mode="before")
    @classmethod
    def _flat_params(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        own = {k: v for k, v in data.items() if k in cls.model_fields}
        flat = {k: v for k, v in data.items() if k not in cls.model_fields}
        if flat:
            own["params"] = {**dict(own.get("params") or {}), **flat}  # a flat key overrides (--set env.k=5)
        return own

    @model_validator(mode="after")
    def _check(self) -> "EnvConfig":
        try:
            cls = tag_strategy(self.strategy)
        except UnknownNameError as e:  # a KeyError; pydantic reports ValueErrors
            raise ValueError(str(e)) from None
        unknown = sorted(set(self.params) - set(cls.Params.model_fields))
        if unknown:
            raise ValueError(f"strategy {self.strategy!r} has no params {unknown}; its params: {sorted(cls.Params.model_fields)}")
        self.params = self.strategy_params().model_dump(mode="json")  # validated at load; every param, defaults included
        return self

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The flat form: the strategy, its params beside the token limits (as configs were written
        before the strategy was named, so stored run configurations keep their keys)."""
        data = handler(self)
        return {"strategy": data.pop("strategy"), **data.pop("params"), **data}

    def strategy_class(self) -> type[TagStrategy]:
        return tag_strategy(self.strategy)

    def strategy_params(self) -> BaseModel:
        """The strategy's typed Params."""
        return self.strategy_class().Params.model_validate(self.params)

    def params_as(self, cls: type[P]) -> P:
        """The strategy's Params as ``cls`` (e.g. ``RouteRAGParams`` for what only a RouteRAG
        episode has: mode sources, few-shot prompt); a ValueError for another strategy."""
        params = self.strategy_params()
        if not isinstance(params, cls):
            raise ValueError(f"this needs a {cls.__name__} episode; env.strategy is {self.strategy!r}")
        return params


class RolloutCost(BaseModel):
    retrieval_turns: int = 0
    retrieval_ms: float = 0.0  # measured wall time of the retrieval calls
    mode_cost: float = 0.0  # sum of the charges recorded per call (Step.retrieval_cost; RouteRAG: its mode_cost)
    by_mode: dict[str, int] = Field(default_factory=dict)
    generation_ms: float = 0.0


class Rollout(BaseModel):
    """One episode, ready for a trainer: ``len(completion_ids) == len(env_mask) == len(logprobs)``."""

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float]
    trace: Trace
    cost: RolloutCost
    truncated: bool = False  # cut by max_completion_tokens
    finished: Literal["answer", "forced", "truncated"] = "answer"

    @property
    def model_tokens(self) -> int:
        return sum(self.env_mask)


class RolloutEnv:
    """Runs episodes of ``config.strategy`` against ``sources`` with a token-level policy."""

    def __init__(self, sources: SourceSet, codec: TokenCodec, config: EnvConfig | None = None) -> None:
        self.sources = sources
        self.codec = codec
        self.config = config or EnvConfig()
        self.strategy = self.config.strategy_class()
        self.params = self.config.strategy_params()
        unknown = [s for s in self.strategy.search_sources(self.params) if s not in sources.names()]
        if unknown:
            raise ValueError(f"sources {unknown} are not mounted; mounted: {sources.names()}")
        # retrieve_step only reads ``ctx.sources``; no chat model is involved in a token-level rollout
        self._ctx = StrategyContext(model=None, sources=sources)  # type: ignore[arg-type]

    def episode(self, question: str) -> EpisodeSetup:
        """The strategy's episode for ``question`` (rules, prompt messages), as evaluation builds it."""
        return self.strategy.episode(self.params, question)

    def prompt_messages(self, question: str) -> list[Message]:
        """The prompt messages of an episode (before the chat template)."""
        return self.episode(question).messages

    def user_prompt(self, question: str) -> str:
        """The user message of an episode (before the chat template)."""
        return [m.content for m in self.prompt_messages(question) if m.role == "user"][-1]

    def prompt_text(self, question: str) -> str:
        """The prompt as the policy sees it: the messages through the codec's chat template."""
        return self.codec.render_messages(self.prompt_messages(question))

    def rollout(self, question: str | Question, generate: Generate) -> Rollout:
        cfg = self.config
        text, qid = question_parts(question)
        setup = self.episode(text)
        trace = Trace(question=text, strategy=cfg.strategy, qid=qid, params=self.params.model_dump(mode="json"))
        policy = TokenPolicy(self.codec, generate, self.codec.render_messages(setup.messages) + setup.rules.prefix,
                             max_new_tokens=cfg.max_new_tokens_per_turn, max_completion_tokens=cfg.max_completion_tokens,
                             max_observation_tokens=cfg.max_observation_tokens)
        t_start = time.perf_counter()
        episode = run_episode(self._ctx, trace, policy, setup.rules)
        trace.latency_ms = (time.perf_counter() - t_start) * 1000.0
        cost = RolloutCost(generation_ms=episode.policy_ms)
        for plan, step in episode.searches:
            # the mode a mode router chose; else where the search went (several sources: joined)
            mode = plan.mode or (plan.route.choice if plan.route is not None else "+".join(plan.sources))
            cost.retrieval_turns += 1
            cost.retrieval_ms += step.retrieval_ms
            cost.mode_cost += step.retrieval_cost if step.retrieval_cost is not None else search_price(step, DEFAULT_MODE_COST)
            cost.by_mode[mode] = cost.by_mode.get(mode, 0) + 1
        return Rollout(
            prompt_ids=policy.prompt_ids, completion_ids=policy.completion, env_mask=policy.mask,
            logprobs=policy.logprobs, trace=trace, cost=cost, truncated=episode.finish == "truncated",
            finished=episode.finish or "truncated",
        )

    def rollouts(self, questions: Sequence[str | Question], generate: Generate) -> list[Rollout]:
        """One episode per entry (a trainer passes each question ``num_generations`` times)."""
        return [self.rollout(q, generate) for q in questions]


RouteRAGEnv = RolloutEnv  # the name from when the environment ran RouteRAG's episode only
