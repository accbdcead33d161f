"""Efficiency of one answered question, read from its :class:`~routerag.trace.Trace`: retrieval
turns and calls (by source and by mode), retrieval time, model tokens over every call, end-to-end
latency and format errors."""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel, Field

from routerag.trace import Step, Trace


class CostMetrics(BaseModel):
    retrieval_turns: int = 0  # search steps the strategy took
    retrieval_calls: int = 0  # source calls: a step that queries two sources counts two
    calls_by_source: dict[str, int] = Field(default_factory=dict)
    calls_by_mode: dict[str, int] = Field(default_factory=dict)
    retrieval_ms: float = 0.0
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    model_ms: float = 0.0
    latency_ms: float = 0.0  # end to end, as the strategy measured it
    format_errors: int = 0


def step_modes(step: Step) -> list[str]:
    """The retrieval modes a search step used: the ``mode`` of its hits (a source can serve
    several), else the sources it named (a call that returned nothing still happened)."""
    modes = sorted({hit.mode for hit in step.hits})
    return modes or list(step.sources)


def trace_cost(trace: Trace) -> CostMetrics:
    """Every efficiency figure of one trace (the trace's own totals, never recounted)."""
    by_source = trace.retrieval_calls_by_source()
    by_mode: Counter[str] = Counter()
    for step in trace.search_steps:
        by_mode.update(step_modes(step))
    calls = trace.model_calls
    return CostMetrics(
        retrieval_turns=trace.retrieval_turns,
        retrieval_calls=sum(by_source.values()),
        calls_by_source=dict(sorted(by_source.items())),
        calls_by_mode=dict(sorted(by_mode.items())),
        retrieval_ms=round(trace.retrieval_ms, 3),
        model_calls=len(calls),
        prompt_tokens=trace.prompt_tokens,
        completion_tokens=trace.completion_tokens,
        total_tokens=trace.prompt_tokens + trace.completion_tokens,
        model_ms=round(trace.model_ms, 3),
        latency_ms=round(trace.latency_ms, 3),
        format_errors=trace.format_errors,
    )
