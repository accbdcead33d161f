"""The RouteRAG rollout environment: one multi-turn episode over token ids, trainer-independent.

A state machine in the style of verl's tool agent loop::

    PROMPT ──► GENERATE ──► PARSE ──┬─ answer ─────────────────────────────► DONE
                  ▲                 ├─ search ─► RETRIEVE ─► OBSERVE ──┐
                  │                 └─ none ───► INVALID ──► OBSERVE ──┤
                  └──────────────── (budget left) ◄────────────────────┘
                  budget spent ─► FORCE_ANSWER (generate after ``<answer>``) ─► DONE

The policy is any ``generate(prompt_ids, stop_strings, max_new_tokens) -> (completion_ids,
logprobs)`` callable; the environment parses each turn with :mod:`routerag.protocol.routerag_tags`
and plans the search with RouteRAG's own :class:`~routerag.strategies.routerag.ModeRouter`, so the
protocol trained here is byte for byte the one :class:`~routerag.strategies.routerag.RouteRAG`
evaluates. Retrieval goes through a real :class:`~routerag.sources.sourceset.SourceSet` via
:func:`~routerag.strategies.loop.retrieve_step` (the same step records as evaluation).

The result is a :class:`Rollout`: ``prompt_ids``, ``completion_ids`` (model and observation
tokens interleaved), ``env_mask`` (1 = the policy's own token, 0 = inserted by the environment:
evidence, repairs, the forced-answer cue), ``logprobs`` (0 for observation tokens), the
:class:`~routerag.trace.Trace` (steps, segments, answer) and the episode's cost (retrieval turns,
measured retrieval wall time, deterministic per-mode cost).

Every token the policy sampled is kept, even text after the first closing tag of a turn (the
strategy loop drops it from its transcript): the loss must see exactly the sampled sequence.
This module does not import any trainer library (no TRL, no torch).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from routerag.corpus.schema import Question
from routerag.protocol.routerag_tags import INFORMATION_CLOSE, MODES, SEARCH_R1, information_block, parse_action
from routerag.sources.sourceset import SourceSet
from routerag.strategies.base import StrategyContext
from routerag.strategies.loop import add_step, question_parts, retrieve_step
from routerag.strategies.parsing import clean_answer
from routerag.strategies.prompts import FORCE_ANSWER, INVALID_ACTION, routerag_prompt
from routerag.strategies.routerag import ModeRouter, RouteRAGParams
from routerag.trace import ForcedAnswer, Segment, Trace
from routerag.train.rewards import DEFAULT_MODE_COST

Generate = Callable[[list[int], list[str], int], tuple[list[int], list[float]]]
"""``generate(prompt_ids, stop_strings, max_new_tokens) -> (completion_ids, logprobs)``."""


class TokenCodec(Protocol):
    """What the environment needs from a tokenizer."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def render_prompt(self, user_text: str) -> str: ...


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


class EnvConfig(BaseModel):
    """Parameters of one RouteRAG episode (the retrieval side mirrors ``RouteRAGParams``)."""

    model_config = ConfigDict(extra="forbid")

    k: int = Field(default=3, ge=1, le=50, description="documents per retrieval call (RouteRAG release: retriever.topk=3)")
    max_turns: int = Field(default=4, ge=0, le=32, description="retrieval budget B; invalid turns count too (RouteRAG release: max_turns=4)")
    allowed_modes: list[Literal["passage", "graph", "hybrid"]] = Field(
        default_factory=lambda: list(MODES), min_length=1, description="modes the policy may search; others are replaced by default_mode"
    )
    default_mode: Literal["passage", "graph", "hybrid"] = Field(default="passage", description="mode of a search without a usable tag")
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
        if self.default_mode not in self.allowed_modes:
            self.default_mode = self.allowed_modes[0]
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


def cut_observation(codec: TokenCodec, text: str, limit: int) -> list[int]:
    """At most ``limit`` token ids of an observation. An ``<information>`` block is cut inside its
    body and keeps its closing tag (and the whitespace after it), so a cut observation still looks
    like the ones the policy saw in SFT and sees in evaluation (which cuts none) — a block cut
    through its closing tag makes the policy go on writing the document instead of acting. Other
    text is cut at ``limit``."""
    ids = codec.encode(text)
    if len(ids) <= limit:
        return ids
    core = text.rstrip()
    if core.endswith(INFORMATION_CLOSE):
        suffix_ids = codec.encode(" ...\n" + INFORMATION_CLOSE + text[len(core):])
        if len(suffix_ids) < limit:
            body_ids = codec.encode(core[: -len(INFORMATION_CLOSE)])
            return body_ids[: limit - len(suffix_ids)] + suffix_ids
    return ids[:limit]


class _Episode:
    """Mutable state of one episode: token buffers kept in step with the trace's segments."""

    def __init__(self, codec: TokenCodec, prompt_text: str, prefix: str) -> None:
        self.codec = codec
        self.prompt_ids = codec.encode(prompt_text + prefix)
        self.completion: list[int] = []
        self.mask: list[int] = []
        self.logprobs: list[float] = []
        self.segments: list[Segment] = [Segment(kind="prompt", text=prompt_text + prefix)]

    def _segment(self, kind: str, text: str) -> None:
        if not text:
            return
        last = self.segments[-1]
        if last.kind == kind:
            self.segments[-1] = Segment(kind=last.kind, text=last.text + text)
        else:
            self.segments.append(Segment(kind=kind, text=text))  # type: ignore[arg-type]

    def add_model(self, ids: Sequence[int], logprobs: Sequence[float]) -> str:
        if len(ids) != len(logprobs):
            raise ValueError(f"generate returned {len(ids)} ids but {len(logprobs)} logprobs")
        self.completion += list(ids)
        self.mask += [1] * len(ids)
        self.logprobs += [float(x) for x in logprobs]
        text = self.codec.decode(ids)
        self._segment("model", text)
        return text

    def add_observation(self, text: str, limit: int | None = None) -> None:
        ids = self.codec.encode(text)
        if limit is not None and len(ids) > limit:
            ids = cut_observation(self.codec, text, limit)
            text = self.codec.decode(ids)
        self.completion += ids
        self.mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)
        self._segment("observation", text)

    @property
    def context(self) -> list[int]:
        return self.prompt_ids + self.completion


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

    def prompt_text(self, question: str) -> str:
        template = self.config.prompt_template
        user = template.format(question=question) if template else routerag_prompt(question, few_shot=self.config.few_shot)
        return self.codec.render_prompt(user)

    def rollout(self, question: str | Question, generate: Generate) -> Rollout:
        cfg = self.config
        text, qid = question_parts(question)
        trace = Trace(question=text, strategy="routerag", qid=qid, params=self.params.model_dump(mode="json"))
        episode = _Episode(self.codec, self.prompt_text(text), cfg.assistant_prefix)
        router = ModeRouter(self.params, text)
        cost = RolloutCost()
        pending = cfg.assistant_prefix  # prompt-side text that belongs to the first turn's action
        t_start = time.perf_counter()
        finished: Literal["answer", "forced", "truncated"] | None = None
        for _ in range(cfg.max_turns):
            budget = cfg.max_completion_tokens - len(episode.completion)
            if budget <= 0:
                finished = "truncated"
                break
            t0 = time.perf_counter()
            ids, logprobs = generate(episode.context, SEARCH_R1.stops, min(cfg.max_new_tokens_per_turn, budget))
            gen_ms = (time.perf_counter() - t0) * 1000.0
            cost.generation_ms += gen_ms
            output = episode.add_model(ids, logprobs)
            action = parse_action(pending + output, SEARCH_R1)
            pending = ""
            common: dict[str, Any] = {"raw_output": output, "reasoning": action.reasoning, "latency_ms": gen_ms}
            if not action.closed:
                episode.add_observation(SEARCH_R1.search_close if action.kind == "search" else SEARCH_R1.answer_close)
            if action.kind == "answer":
                add_step(trace, "answer", answer=action.answer, format_error=action.format_error, **common)
                trace.answer = action.answer
                finished = "answer"
                break
            plan = router(action, text) if action.kind == "search" else None
            if plan is not None and cfg.strict_modes and any(
                e == "missing_mode" or e.startswith("unknown_mode") for e in plan.errors
            ):
                add_step(trace, "format_error", format_error="; ".join(action.errors + plan.errors),
                         observation=INVALID_ACTION, **common)
                episode.add_observation(INVALID_ACTION)
                continue
            if plan is not None:
                mode = plan.mode  # the mode ModeRouter chose (several modes may share a source)
                if mode is None:
                    raise RuntimeError("ModeRouter returned a search plan without its mode")
                errors = action.errors + plan.errors
                step = retrieve_step(
                    self._ctx, trace, plan.query, plan.sources, plan.k, information_block,
                    route=plan.route, format_error="; ".join(errors) or None, retrieval_cost=cfg.mode_cost.get(mode, 1.0),
                    metadata={"tags": plan.tags, "raw_query": action.query}, **common,
                )
                step.latency_ms = gen_ms + step.retrieval_ms
                cost.retrieval_turns += 1
                cost.retrieval_ms += step.retrieval_ms
                cost.mode_cost += cfg.mode_cost.get(mode, 1.0)
                cost.by_mode[mode] = cost.by_mode.get(mode, 0) + 1
                episode.add_observation(step.observation, cfg.max_observation_tokens)
            else:
                add_step(trace, "format_error", format_error=action.format_error, observation=INVALID_ACTION, **common)
                episode.add_observation(INVALID_ACTION)
        if finished is None:
            finished = self._final_answer(trace, episode, generate)
        trace.segments = episode.segments
        trace.latency_ms = (time.perf_counter() - t_start) * 1000.0
        return Rollout(
            prompt_ids=episode.prompt_ids, completion_ids=episode.completion, env_mask=episode.mask,
            logprobs=episode.logprobs, trace=trace, cost=cost, truncated=finished == "truncated", finished=finished,
        )

    def _final_answer(self, trace: Trace, episode: _Episode, generate: Generate) -> Literal["forced", "truncated"]:
        cfg = self.config
        if cfg.reader == "top_hit_title":
            last = trace.search_steps[-1] if trace.search_steps else None
            answer = last.hits[0].title if last and last.hits else ""
            add_step(trace, "answer", answer=answer, format_error=None if answer else "empty_answer",
                     forced=ForcedAnswer(reader="top_hit_title"))
            trace.answer = answer
            return "forced"
        budget = cfg.max_completion_tokens - len(episode.completion)
        if budget <= len(self.codec.encode(FORCE_ANSWER)) + 1:
            add_step(trace, "answer", answer="", format_error="truncated; empty_answer", forced=ForcedAnswer())
            return "truncated"
        episode.add_observation(FORCE_ANSWER)
        budget = cfg.max_completion_tokens - len(episode.completion)
        t0 = time.perf_counter()
        ids, logprobs = generate(episode.context, [SEARCH_R1.answer_close], min(cfg.max_new_tokens_per_turn, budget))
        gen_ms = (time.perf_counter() - t0) * 1000.0
        output = episode.add_model(ids, logprobs)
        errors = ["no_answer_within_budget"]
        if SEARCH_R1.answer_close not in output:
            errors.append("unclosed_answer")
        body = output.split(SEARCH_R1.answer_close)[0]
        answer = clean_answer(body.split("<")[0]) or clean_answer(body)
        if not answer:
            errors.append("empty_answer")
        add_step(trace, "answer", answer=answer, format_error="; ".join(errors), raw_output=output,
                 latency_ms=gen_ms, forced=ForcedAnswer())
        trace.answer = answer
        return "forced"

    def rollouts(self, questions: Sequence[str | Question], generate: Generate) -> list[Rollout]:
        """One episode per entry (a trainer passes each question ``num_generations`` times)."""
        return [self.rollout(q, generate) for q in questions]
