"""Routing quality, read from traces: did the strategy send the question to the source that holds
its answer (``Question.gold_source``, e.g. RealRoute's law-med), and which modes did it use at
each retrieval turn (the papers' mode-usage figures)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pydantic import BaseModel

from routerag.trace import Step, Trace


class RoutingOutcome(BaseModel):
    gold_source: str
    chosen: list[str]  # the sources of the first routing decision ([] if none was made)
    correct: bool  # the first decision chose exactly the gold source
    gold_used: bool  # the gold source was queried at some step


def _decision(step: Step) -> list[str]:
    """A ``route`` step's choice or a ``search`` step's sources (a reflection's move is not a first decision)."""
    return step.decision() if step.kind in ("route", "search") else []


def first_decision(trace: Trace) -> list[str]:
    """The sources named by the first ``route`` or ``search`` step (a router's choice comes
    first; strategies without an explicit route step decide by searching)."""
    for step in trace.steps:
        chosen = _decision(step)
        if chosen:
            return chosen
    return []


def routing_outcome(trace: Trace, gold_source: str | None) -> RoutingOutcome | None:
    """Compare the trace's routing with the gold source (case-insensitive); ``None`` without one."""
    if not gold_source:
        return None
    gold = gold_source.casefold()
    chosen = first_decision(trace)
    used = {name.casefold() for step in trace.steps for name in _decision(step)}
    return RoutingOutcome(
        gold_source=gold_source,
        chosen=chosen,
        correct=[c.casefold() for c in chosen] == [gold],
        gold_used=gold in used,
    )


def search_step_sources(trace: Trace) -> list[list[str]]:
    """What each retrieval turn queried, in order (turn 1 first)."""
    return [list(step.sources) for step in trace.search_steps]


def mode_usage_by_turn(per_trace: Iterable[list[list[str]]]) -> dict[int, dict[str, int]]:
    """``{turn: {mode: count}}`` over many traces, turns numbered from 1; a turn that queries two
    modes counts once for each."""
    usage: dict[int, Counter[str]] = {}
    for turns in per_trace:
        for turn, sources in enumerate(turns, start=1):
            usage.setdefault(turn, Counter()).update(sources)
    return {turn: dict(sorted(counts.items())) for turn, counts in sorted(usage.items())}
