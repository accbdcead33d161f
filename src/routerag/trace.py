"""The Trace: one type produced by every strategy and consumed by evaluation, training and the UI."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr

from routerag.sources.base import Hit

log = logging.getLogger(__name__)

StepKind = Literal[
    "think",  # reasoning only
    "search",  # a retrieval call the policy asked for
    "route",  # a routing decision made before retrieval (hard-route, Adaptive Cap)
    "decompose",  # question decomposition
    "select",  # evidence selection (score / rrf / llm judge)
    "answer",  # an intermediate or final answer
    "reflect",  # reflection after a failure
    "fuse",  # answer fusion
    "format_error",  # the model broke the protocol; ``format_error`` says how and what recovery was applied
]


class ModelCall(BaseModel):
    """One call to a chat model, accounted for in the trace."""

    purpose: str  # "policy", "decompose", "route", "judge", "answer", "fuse", "reflect", ...
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    cached: bool = False


class Segment(BaseModel):
    """A piece of the policy's transcript. Training masks ``observation`` (and ``prompt``) tokens
    out of the loss; only ``model`` tokens are the policy's own."""

    kind: Literal["prompt", "model", "observation"]
    text: str


class Step(BaseModel):
    index: int
    kind: StepKind
    reasoning: str = ""
    query: str | None = None
    sources: list[str] = Field(default_factory=list)  # modes or named sources queried / chosen
    routing_reason: str = ""  # why this source / mode was chosen, when the strategy knows
    hits: list[Hit] = Field(default_factory=list)
    kept_doc_ids: list[str] = Field(default_factory=list)  # which hits a selector kept
    observation: str = ""  # exactly what was shown to the model
    answer: str | None = None  # intermediate answer of this step, if any
    model_calls: list[ModelCall] = Field(default_factory=list)
    retrieval_ms: float = 0.0
    latency_ms: float = 0.0
    format_error: str | None = None
    raw_output: str = ""  # the model's text for this step, verbatim
    metadata: dict[str, Any] = Field(default_factory=dict)


StepObserver = Callable[[Step], None]
"""Called with each step as it is appended to a trace (see :meth:`Trace.observe`)."""


class Trace(BaseModel):
    question: str
    strategy: str
    qid: str | None = None
    steps: list[Step] = Field(default_factory=list)
    answer: str = ""
    fallback_answer: str | None = None  # e.g. RealRoute's last-hop answer when fusion fails
    segments: list[Segment] = Field(default_factory=list)  # the policy transcript, for training
    error: str | None = None  # set when the strategy raised; the run goes on
    latency_ms: float = 0.0
    params: dict[str, Any] = Field(default_factory=dict)  # the strategy's resolved parameters (for display/report)
    _on_step: StepObserver | None = PrivateAttr(default=None)  # not part of the record

    # ---- building ----
    def observe(self, on_step: StepObserver | None) -> None:
        """Call ``on_step(step)`` for every step :meth:`add` appends from now on (the service's
        live stream: ``StrategyContext.on_step``). The observer is not stored with the trace."""
        self._on_step = on_step

    def add(self, step: Step) -> Step:
        """Append ``step`` and tell the observer: the one place a step joins a trace. An observer
        that raises is logged and ignored (showing a step must not change the answer)."""
        self.steps.append(step)
        if self._on_step is not None:
            try:
                self._on_step(step)
            except Exception:  # noqa: BLE001 — a display concern; the run goes on
                log.exception("the step observer failed on step %d", step.index)
        return step

    # ---- totals, derived (never stored twice) ----
    @property
    def model_calls(self) -> list[ModelCall]:
        return [c for s in self.steps for c in s.model_calls]

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.model_calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.model_calls)

    @property
    def search_steps(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "search"]

    @property
    def retrieval_turns(self) -> int:
        return len(self.search_steps)

    @property
    def retrieval_ms(self) -> float:
        return sum(s.retrieval_ms for s in self.steps)

    @property
    def model_ms(self) -> float:
        return sum(c.latency_ms for c in self.model_calls)

    @property
    def format_errors(self) -> int:
        return sum(1 for s in self.steps if s.format_error)

    def retrieval_calls_by_source(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for step in self.steps:
            if step.kind == "search":
                for name in step.sources:
                    counts[name] = counts.get(name, 0) + 1
        return counts

    def summary(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "retrieval_turns": self.retrieval_turns,
            "retrieval_ms": round(self.retrieval_ms, 2),
            "model_ms": round(self.model_ms, 2),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "format_errors": self.format_errors,
            "latency_ms": round(self.latency_ms, 2),
            "error": self.error,
        }
