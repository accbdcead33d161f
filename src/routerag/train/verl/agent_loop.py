"""A routerag agent loop for verl's agent-loop rollout (``actor_rollout_ref.rollout.agent``): the
episode of the tag strategy ``env.strategy`` names (default RouteRAG, described below).

verl runs one agent loop per sample as an asyncio task and asks it for prompt ids, response ids,
a response mask (1 = the policy's token, 0 = inserted by the environment) and log-probs. This
module answers with :class:`~routerag.train.env.RouteRAGEnv` — the same episode the TRL recipes
and evaluation run: each turn is generated up to ``</search>`` / ``</answer>``, parsed with
:mod:`routerag.protocol.routerag_tags`, routed by RouteRAG's ``ModeRouter``, retrieved over HTTP
from a routerag retrieval server (``routerag serve-retrieval``, its native ``/retrieve``
endpoint through :class:`~routerag.sources.remote.RemoteSource`), and the ``<information>`` block
is appended with mask 0; the episode ends at ``<answer>`` or, after ``max_turns`` retrievals, with
the forced-answer cue.

The environment is synchronous; :class:`RouteRAGAgent` runs an episode in a worker thread and
sends each turn's generation back to the event loop (``asyncio.run_coroutine_threadsafe``), so
many episodes share one verl worker process. Nothing in this module imports verl, so these parts are tested without
it; the class verl instantiates is ``routerag.train.verl.verl_loop.RouteRAGAgentLoop``, built on
first lookup. verl reads it from an agent-loop YAML (``configs/train/verl/agent_loop.yaml``)::

    - name: routerag_agent
      _target_: routerag.train.verl.verl_loop.RouteRAGAgentLoop
      retrieval_url: http://127.0.0.1:8765
      env: {k: 3, max_turns: 4}
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from routerag.corpus.schema import Question
from routerag.sources.remote import RemoteSource, RetrievalClient
from routerag.sources.sourceset import SourceSet
from routerag.trace import ForcedAnswer, Route, Step, Trace
from routerag.train.env import EnvConfig, HFCodec, Rollout, RouteRAGEnv, TokenCodec

AsyncGenerate = Callable[[list[int], list[str], int], Coroutine[Any, Any, tuple[list[int], list[float] | None]]]
"""``await agenerate(prompt_ids, stop_strings, max_new_tokens) -> (token_ids, logprobs or None)``."""


class AgentLoopSettings(BaseModel):
    """The agent loop's settings: the extra keys of its entry in verl's agent-loop YAML."""

    model_config = ConfigDict(extra="forbid")

    retrieval_url: str = Field(description="base URL of a routerag retrieval server (routerag serve-retrieval)")
    api_key_env: str | None = Field(default=None, description="environment variable holding the server's API key")
    timeout_s: float = Field(default=30.0, gt=0, description="read timeout of one retrieval call (verl's search tool: 30 s)")
    retries: int = Field(default=2, ge=0, le=10, description="retries on connection errors and 502/503/504")
    env: EnvConfig = Field(
        default_factory=EnvConfig,
        description="the episode: the strategy and its params (routerag: k, max_turns, allowed/default modes, mode_sources "
        "(source names on the server), mode_cost), token limits (max_completion_tokens is capped at verl's "
        "rollout.response_length)",
    )
    episode_threads: int = Field(
        default=256, ge=1, le=4096,
        description="episodes that run at once in one verl agent-loop worker (each holds a thread while it waits "
        "for generation or retrieval)",
    )
    check_prompt: bool = Field(
        default=True,
        description="refuse a row whose user message is not the prompt this environment builds (the parquet and the "
        "agent loop must agree on prompt settings: few_shot, prompt_template)",
    )


class StepRecord(BaseModel):
    """One step of an episode as the reward needs it (no hits, no text): what it was, where a
    search went, what it was charged, whether it broke the protocol."""

    kind: Literal["search", "answer", "format_error"]
    choice: str | None = None  # search: where the route went (Route.choice)
    mode: str | None = None  # search: the mode a mode router chose (RouteRAG); None for other planners
    sources: list[str] = Field(default_factory=list)
    retrieval_cost: float | None = None  # the charge the episode recorded (Step.retrieval_cost)
    retrieval_ms: float = 0.0
    format_error: str | None = None
    forced: bool = False  # answer: given after the forced-answer cue (or empty when cut)


class EpisodeRecord(BaseModel):
    """What the agent loop records of one episode for the reward (``extra_fields["routerag_episode"]``;
    verl's reward loop merges the extra fields into the reward function's ``extra_info``): the
    reward reads these instead of re-parsing the decoded text."""

    strategy: str
    answer: str
    finished: Literal["answer", "forced", "truncated"]
    steps: list[StepRecord]

    @classmethod
    def of(cls, rollout: Rollout) -> EpisodeRecord:
        steps = []
        for s in rollout.trace.steps:
            if s.kind not in ("search", "answer", "format_error"):
                continue
            route = s.route if s.kind == "search" else None
            steps.append(StepRecord(kind=s.kind, choice=route.choice if route else None, mode=route.mode if route else None,  # type: ignore[arg-type]
                                    sources=list(s.sources),
                                    retrieval_cost=s.retrieval_cost, retrieval_ms=s.retrieval_ms,
                                    format_error=s.format_error, forced=s.forced is not None))
        return cls(strategy=rollout.trace.strategy, answer=rollout.trace.answer, finished=rollout.finished, steps=steps)

    def trace(self, question: str = "") -> Trace:
        """The episode's steps as a :class:`~routerag.trace.Trace` for the registered rewards."""
        trace = Trace(question=question, strategy=self.strategy, answer=self.answer)
        for s in self.steps:
            route = Route(choice=s.choice, mode=s.mode) if s.choice is not None else None
            trace.add(Step(index=len(trace.steps), kind=s.kind, sources=list(s.sources), route=route,
                           retrieval_cost=s.retrieval_cost, retrieval_ms=s.retrieval_ms, format_error=s.format_error,
                           forced=ForcedAnswer() if s.forced else None,
                           answer=self.answer if s.kind == "answer" else None))
        return trace


class EpisodeOutput(BaseModel):
    """What verl's ``AgentLoopOutput`` is built from (verl-free, so it is tested here)."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float] | None = None
    num_turns: int
    metrics: dict[str, float]
    extra_fields: dict[str, Any]


def episode_output(rollout: Rollout, *, response_length: int, with_logprobs: bool) -> EpisodeOutput:
    """A rollout in verl's terms: the response cut to ``response_length``, ``num_turns`` the
    transcript's messages (prompt, model turns, observations), ``metrics`` in seconds as verl's
    ``AgentLoopMetrics`` (``generate_sequences``, ``tool_calls``), and the episode's retrieval cost
    in ``extra_fields`` (verl's reward loop merges them into the reward function's ``extra_info``)."""
    n = min(len(rollout.completion_ids), response_length)
    cost = rollout.cost
    return EpisodeOutput(
        prompt_ids=list(rollout.prompt_ids),
        response_ids=rollout.completion_ids[:n],
        response_mask=rollout.env_mask[:n],
        response_logprobs=rollout.logprobs[:n] if with_logprobs else None,
        num_turns=len(rollout.trace.segments),
        metrics={"generate_sequences": cost.generation_ms / 1000.0, "tool_calls": cost.retrieval_ms / 1000.0},
        extra_fields={
            "routerag_answer": rollout.trace.answer,
            "routerag_finished": rollout.finished,
            "routerag_retrieval_turns": cost.retrieval_turns,
            "routerag_mode_cost": cost.mode_cost,
            "routerag_retrieval_ms": cost.retrieval_ms,
            "routerag_by_mode": dict(cost.by_mode),
            "routerag_format_errors": rollout.trace.format_errors,
            "routerag_episode": EpisodeRecord.of(rollout).model_dump(mode="json"),
        },
    )


def remote_sourceset(settings: AgentLoopSettings) -> SourceSet:
    """The sources the episode's searches use, mounted from the retrieval server (one connection pool)."""
    api_key = None
    if settings.api_key_env:
        api_key = os.environ.get(settings.api_key_env)
        if not api_key:
            raise ValueError(f"environment variable {settings.api_key_env} (the retrieval server's API key) is not set")
    client = RetrievalClient(settings.retrieval_url, api_key=api_key, timeout_s=settings.timeout_s, retries=settings.retries)
    names = settings.env.strategy_class().search_sources(settings.env.strategy_params())
    return SourceSet(RemoteSource(client, name) for name in names)


def question_of(row: dict[str, Any]) -> Question:
    """The training question of a dataset row as ``routerag export-verl`` writes it
    (``extra_info.question``/``qid``; ``reward_model.ground_truth.target`` as answers)."""
    extra = row.get("extra_info") or {}
    text = extra.get("question")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("the row has no extra_info.question; write the training parquet with `routerag export-verl`")
    truth = (row.get("reward_model") or {}).get("ground_truth") or {}
    targets = truth.get("target", []) if isinstance(truth, dict) else truth
    answers = [targets] if isinstance(targets, str) else [str(t) for t in targets]
    qid = str(extra.get("qid") or extra.get("index") or "")
    return Question(qid=qid or "q", question=text, answers=answers)


def user_message(messages: Sequence[dict[str, Any]]) -> str | None:
    users = [m.get("content") for m in messages if m.get("role") == "user"]
    return users[-1] if users and isinstance(users[-1], str) else None


class RouteRAGAgent:
    """Runs RouteRAG episodes for an async token server; one per worker process (it owns the
    thread pool; the environment, sources and codec are shared by its episodes)."""

    def __init__(self, env: RouteRAGEnv, *, threads: int = 256, check_prompt: bool = True) -> None:
        self.env = env
        self.check_prompt = check_prompt
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="routerag-episode")

    def check_row_prompt(self, question: Question, messages: Sequence[dict[str, Any]]) -> None:
        if not self.check_prompt:
            return
        expected = self.env.user_prompt(question.question)
        got = user_message(messages)
        if got != expected:
            raise ValueError(
                f"question {question.qid}: the row's user message is not the prompt this agent loop builds "
                "(export the parquet with the same few_shot / prompt_template as env, or set check_prompt: false)"
            )

    async def run(self, question: str | Question, agenerate: AsyncGenerate) -> Rollout:
        """One episode; :func:`episode_output` turns it into what verl needs."""
        loop = asyncio.get_running_loop()

        def generate(prompt_ids: list[int], stops: list[str], max_new: int) -> tuple[list[int], list[float]]:
            future = asyncio.run_coroutine_threadsafe(agenerate(list(prompt_ids), list(stops), max_new), loop)
            ids, logprobs = future.result()
            ids = list(ids)
            return ids, [float(x) for x in logprobs] if logprobs is not None else [0.0] * len(ids)

        return await loop.run_in_executor(self._executor, self.env.rollout, question, generate)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def build_agent(settings: AgentLoopSettings, codec: TokenCodec, *, response_length: int | None = None) -> RouteRAGAgent:
    env_config = settings.env
    if response_length is not None and env_config.max_completion_tokens > response_length:
        env_config = env_config.model_copy(update={"max_completion_tokens": response_length})
    env = RouteRAGEnv(remote_sourceset(settings), codec, env_config)
    return RouteRAGAgent(env, threads=settings.episode_threads, check_prompt=settings.check_prompt)


_AGENTS: dict[tuple[str, int, int | None], RouteRAGAgent] = {}
_AGENTS_LOCK = threading.Lock()


def shared_agent(settings: AgentLoopSettings, tokenizer: Any, response_length: int | None) -> RouteRAGAgent:
    """The process's agent for these settings and tokenizer (verl builds one loop object per
    sample; the sources, thread pool and codec are built once)."""
    key = (json.dumps(settings.model_dump(mode="json"), sort_keys=True), id(tokenizer), response_length)
    with _AGENTS_LOCK:
        agent = _AGENTS.get(key)
        if agent is None:
            agent = _AGENTS[key] = build_agent(settings, HFCodec(tokenizer), response_length=response_length)
        return agent


def server_sampling(sampling_params: dict[str, Any], stops: list[str], max_new: int) -> dict[str, Any]:
    """verl's sampling parameters for one turn: the trainer's (temperature, top_p, top_k,
    logprobs) plus the turn's stop strings and token limit (vLLM / SGLang ``SamplingParams``
    names). A fresh dict per call: the servers pop keys from it."""
    return {**sampling_params, "stop": list(stops), "include_stop_str_in_output": True, "max_tokens": int(max_new)}



def plain(value: Any) -> Any:
    """Nested mappings and sequences (omegaconf's ``DictConfig`` / ``ListConfig`` included) as
    plain dicts and lists, for pydantic."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [plain(v) for v in value]
    return value
