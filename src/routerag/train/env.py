"""The RouteRAG rollout environment: one multi-turn episode over token ids, trainer-independent.

The episode is run by the one episode engine (:mod:`routerag.episode.engine`, the state machine
that also runs the evaluated strategies) through its token port
(:class:`~routerag.episode.ports.TokenPolicy`): the same parser, the same recoveries, the same
forced answer and step records as :class:`~routerag.strategies.routerag.RouteRAG`, with searches
planned by RouteRAG's own :class:`~routerag.strategies.routerag.ModeRouter`. This module adds what
only training needs: the :class:`EnvConfig`, the prompt over a tokenizer's chat template and the
episode's cost.

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
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from routerag.corpus.schema import Question
from routerag.episode.engine import EpisodeRules, SearchPlan, run_episode
from routerag.episode.ports import Generate as Generate
from routerag.episode.ports import TokenCodec as TokenCodec
from routerag.episode.ports import TokenPolicy
from routerag.episode.ports import cut_observation as cut_observation
from routerag.protocol.routerag_tags import MODES, SEARCH_R1, information_block
from routerag.protocol.routerag_tags import parse_action as parse_action  # the parser the engine runs here
from routerag.runtime.base import StrategyContext
from routerag.runtime.loop import question_parts
from routerag.sources.sourceset import SourceSet
from routerag.strategies.prompts import FORCE_ANSWER, INVALID_ACTION, routerag_prompt
from routerag.strategies.routerag import ModeRouter, RouteRAGEpisodeParams, RouteRAGParams
from routerag.trace import Trace
from routerag.train.rewards import DEFAULT_MODE_COST, UNLISTED_PRICE


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
        if not self.chat_template:
            return user_text
        return self.tokenizer.apply_chat_template(
            [{"role": "user", "content": user_text}], tokenize=False, add_generation_prompt=True
        )


class EnvConfig(RouteRAGEpisodeParams):
    """Parameters of one RouteRAG episode (the budget and modes are :class:`RouteRAGEpisodeParams`,
    shared with ``RouteRAGParams``)."""

    model_config = ConfigDict(extra="forbid")

    mode_sources: dict[str, str] = Field(
        default_factory=lambda: {str(m): str(m) for m in MODES}, description="mounted source serving each mode"
    )
    mode_cost: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_MODE_COST),
        description="deterministic cost of one retrieval call per mode (graph dearer than passage)",
    )
    max_new_tokens_per_turn: int = Field(default=256, ge=1, le=8192, description="generation limit of one policy turn")
    max_completion_tokens: int = Field(
        default=1024, ge=1, le=65536, description="limit on the whole completion (model + observation tokens); the episode is cut when reached"
    )
    max_observation_tokens: int = Field(
        default=512, ge=16, le=16384,
        description="observations are cut to this many tokens (Search-R1's max_obs_length=500), inside the <information> "
        "block so that its closing tag stays; evaluation cuts none, so set it above the usual observation length",
    )
    max_query_chars: int = Field(default=300, ge=16, le=2000, description="longer queries are cut at a word boundary")
    few_shot: bool = Field(default=False, description="add RouteRAG's worked example to the prompt")
    prompt_template: str | None = Field(
        default=None, description="user prompt as a str.format template with {question}; None = RouteRAG's released prompt"
    )
    assistant_prefix: str = Field(
        default="", description="text placed at the start of the assistant turn (prompt side, e.g. '<think>'); parsed with the first turn"
    )
    strict_modes: bool = Field(
        default=False,
        description="a search without a known mode tag is an invalid action (no retrieval) instead of going to default_mode; "
        "keeps malformed tags from being rewarded",
    )
    reader: Literal["policy", "top_hit_title"] = Field(
        default="policy",
        description="who answers when the budget is spent: the policy (forced '<answer>' turn) or, for routing-only "
        "diagnostics, the title of the last search's first hit",
    )

    @model_validator(mode="after")
    def _check(self) -> "EnvConfig":
        missing = [m for m in self.allowed_modes if m not in self.mode_sources]
        if missing:
            raise ValueError(f"mode_sources has no source for {missing}")
        return self

    def routing_params(self) -> RouteRAGParams:
        """The RouteRAG strategy parameters equivalent to this episode's retrieval settings."""
        return RouteRAGParams(
            k=self.k, max_turns=self.max_turns, allowed_modes=list(self.allowed_modes), default_mode=self.default_mode,
            mode_sources=dict(self.mode_sources), max_query_chars=self.max_query_chars, few_shot=self.few_shot,
        )


class RolloutCost(BaseModel):
    retrieval_turns: int = 0
    retrieval_ms: float = 0.0  # measured wall time of the retrieval calls
    mode_cost: float = 0.0  # sum of EnvConfig.mode_cost over the calls
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


class RouteRAGEnv:
    """Runs RouteRAG episodes against ``sources`` with a token-level policy."""

    def __init__(self, sources: SourceSet, codec: TokenCodec, config: EnvConfig | None = None) -> None:
        self.sources = sources
        self.codec = codec
        self.config = config or EnvConfig()
        self.params = self.config.routing_params()
        unknown = [s for m, s in self.config.mode_sources.items() if m in self.config.allowed_modes and s not in sources.names()]
        if unknown:
            raise ValueError(f"sources {unknown} are not mounted; mounted: {sources.names()}")
        # retrieve_step only reads ``ctx.sources``; no chat model is involved in a token-level rollout
        self._ctx = StrategyContext(model=None, sources=sources)  # type: ignore[arg-type]

    def user_prompt(self, question: str) -> str:
        """The user message of an episode (before the chat template)."""
        template = self.config.prompt_template
        return template.format(question=question) if template else routerag_prompt(question, few_shot=self.config.few_shot)

    def prompt_text(self, question: str) -> str:
        return self.codec.render_prompt(self.user_prompt(question))

    def rules(self, router: ModeRouter) -> EpisodeRules:
        """The engine's rules for one episode (``router`` plans its searches)."""
        cfg = self.config
        return EpisodeRules(
            protocol=SEARCH_R1, budget=cfg.max_turns, plan=router, render=information_block,
            invalid_message=INVALID_ACTION, force_answer=FORCE_ANSWER, prefix=cfg.assistant_prefix,
            max_observation_tokens=cfg.max_observation_tokens, strict_modes=cfg.strict_modes, reader=cfg.reader,
            search_cost=self._mode_cost,
        )

    def _mode_cost(self, plan: SearchPlan) -> float:
        """The charge of one retrieval: its mode's price (recorded as ``Step.retrieval_cost``)."""
        if plan.mode is None:  # the mode ModeRouter chose (several modes may share a source)
            raise RuntimeError("ModeRouter returned a search plan without its mode")
        return self.config.mode_cost.get(plan.mode, UNLISTED_PRICE)

    def rollout(self, question: str | Question, generate: Generate) -> Rollout:
        cfg = self.config
        text, qid = question_parts(question)
        trace = Trace(question=text, strategy="routerag", qid=qid, params=self.params.model_dump(mode="json"))
        policy = TokenPolicy(self.codec, generate, self.prompt_text(text) + cfg.assistant_prefix,
                             max_new_tokens=cfg.max_new_tokens_per_turn, max_completion_tokens=cfg.max_completion_tokens)
        t_start = time.perf_counter()
        episode = run_episode(self._ctx, trace, policy, self.rules(ModeRouter(self.params, text)))
        trace.latency_ms = (time.perf_counter() - t_start) * 1000.0
        cost = RolloutCost(generation_ms=episode.policy_ms)
        for plan, step in episode.searches:
            mode = str(plan.mode)  # set: ``_mode_cost`` refused a plan without one
            cost.retrieval_turns += 1
            cost.retrieval_ms += step.retrieval_ms
            cost.mode_cost += cfg.mode_cost.get(mode, 1.0)
            cost.by_mode[mode] = cost.by_mode.get(mode, 0) + 1
        return Rollout(
            prompt_ids=policy.prompt_ids, completion_ids=policy.completion, env_mask=policy.mask,
            logprobs=policy.logprobs, trace=trace, cost=cost, truncated=episode.finish == "truncated",
            finished=episode.finish or "truncated",
        )

    def rollouts(self, questions: Sequence[str | Question], generate: Generate) -> list[Rollout]:
        """One episode per entry (a trainer passes each question ``num_generations`` times)."""
        return [self.rollout(q, generate) for q in questions]
