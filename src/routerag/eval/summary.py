"""Aggregate a run's records into its :class:`RunSummary` — one pure function used by the runner
(``summary.json``) and by reports (which rebuild it from ``results.jsonl`` and check it matches)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, Field

from routerag.eval.routing import mode_usage_by_turn, search_step_sources
from routerag.eval.runs import QuestionRecord, RunHeader


class CostSummary(BaseModel):
    """Means per answered question (sums where said)."""

    retrieval_turns: float = 0.0
    retrieval_calls: float = 0.0
    retrieval_ms: float = 0.0
    model_calls: float = 0.0
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    total_tokens: float = 0.0
    model_ms: float = 0.0
    latency_ms: float = 0.0
    format_errors: float = 0.0  # mean per question
    format_error_rate: float = 0.0  # share of questions with at least one


class RoutingSummary(BaseModel):
    n: int  # questions with a gold source
    accuracy: float  # first decision == gold source
    gold_used: float  # gold source queried at some step


class RunSummary(BaseModel):
    name: str
    dataset: str
    strategy: str
    label: str
    n_questions: int  # size of the sample
    n_done: int
    n_errors: int
    complete: bool
    metrics: dict[str, float]  # mean over done questions where the metric is defined
    metric_counts: dict[str, int]  # how many questions each mean is over
    cost: CostSummary
    calls_by_source: dict[str, int] = Field(default_factory=dict)  # totals
    calls_by_mode: dict[str, int] = Field(default_factory=dict)  # totals
    mode_usage_by_turn: dict[int, dict[str, int]] = Field(default_factory=dict)
    routing: RoutingSummary | None = None


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def summarize(header: RunHeader, records: Sequence[QuestionRecord]) -> RunSummary:
    """The run's summary from its header and (already de-duplicated) records."""
    sample = set(header.sample_qids)
    first: dict[str, QuestionRecord] = {}
    for record in records:
        if record.qid in sample:
            first.setdefault(record.qid, record)
    records = list(first.values())
    names: list[str] = list(header.metrics)
    for record in records:
        names.extend(n for n in record.metrics if n not in names)
    metrics: dict[str, float] = {}
    counts: dict[str, int] = {}
    for name in names:
        values = [v for r in records if (v := r.metrics.get(name)) is not None]
        metrics[name] = _mean(values)
        counts[name] = len(values)

    def cost_mean(field: str) -> float:
        return _mean([float(getattr(r.cost, field)) for r in records])

    cost = CostSummary(
        **{field: cost_mean(field) for field in CostSummary.model_fields if field != "format_error_rate"},
        format_error_rate=_mean([float(r.cost.format_errors > 0) for r in records]),
    )
    by_source: Counter[str] = Counter()
    by_mode: Counter[str] = Counter()
    for r in records:
        by_source.update(r.cost.calls_by_source)
        by_mode.update(r.cost.calls_by_mode)
    routed = [r.routing for r in records if r.routing is not None]
    routing = (
        RoutingSummary(
            n=len(routed),
            accuracy=_mean([float(o.correct) for o in routed]),
            gold_used=_mean([float(o.gold_used) for o in routed]),
        )
        if routed
        else None
    )
    return RunSummary(
        name=header.name,
        dataset=header.dataset,
        strategy=header.strategy,
        label=header.label,
        n_questions=len(header.sample_qids),
        n_done=len(records),
        n_errors=sum(1 for r in records if r.error),
        complete=len(records) == len(sample),
        metrics=metrics,
        metric_counts=counts,
        cost=cost,
        calls_by_source=dict(sorted(by_source.items())),
        calls_by_mode=dict(sorted(by_mode.items())),
        mode_usage_by_turn=mode_usage_by_turn(search_step_sources(r.trace) for r in records),
        routing=routing,
    )
