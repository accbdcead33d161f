"""Aggregate a run's records into its :class:`RunSummary` — one pure function used by the runner
(``summary.json``) and by reports (which rebuild it from ``results.jsonl`` and check it matches).

The summary breaks the metrics down by question type (:func:`record_types`): the question's
**form** (yes/no, choice, open — :mod:`routerag.corpus.question_types`) and, where the data has
one, its own **type** (HotpotQA bridge/comparison, MuSiQue hops)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, Field

from routerag.corpus.question_types import QUESTION_FORMS, dataset_type, question_form
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


class GroupScores(BaseModel):
    """The metrics over the questions of one type."""

    n: int
    metrics: dict[str, float]  # mean over the group's questions where the metric is defined
    retrieval_turns: float = 0.0
    calls_by_mode: dict[str, int] = Field(default_factory=dict)  # totals over the group


BREAKDOWN_AXES = ("form", "type")


def record_types(record: QuestionRecord) -> dict[str, str]:
    """The question's groups per axis: ``form`` always; ``type`` when the data has one (the
    stored ``question_type``, else what the qid says: MuSiQue's hop count)."""
    types = {"form": question_form(record.question)}
    kind = record.question_type or dataset_type(record.qid)
    if kind:
        types["type"] = kind
    return types


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
    # axis ("form", "type") -> group ("yes/no", "choice", "open"; "bridge", "2-hop"...) -> scores
    breakdown: dict[str, dict[str, GroupScores]] = Field(default_factory=dict)

    def group(self, axis: str, name: str) -> GroupScores | None:
        return self.breakdown.get(axis, {}).get(name)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _metric_means(records: Sequence[QuestionRecord], names: Sequence[str]) -> tuple[dict[str, float], dict[str, int]]:
    metrics: dict[str, float] = {}
    counts: dict[str, int] = {}
    for name in names:
        values = [v for r in records if (v := r.metrics.get(name)) is not None]
        metrics[name] = _mean(values)
        counts[name] = len(values)
    return metrics, counts


def breakdown(records: Sequence[QuestionRecord], names: Sequence[str]) -> dict[str, dict[str, GroupScores]]:
    """Per axis and group: question count, metric means, mean retrieval turns, searches per mode."""
    groups: dict[str, dict[str, list[QuestionRecord]]] = {}
    for record in records:
        for axis, group in record_types(record).items():
            groups.setdefault(axis, {}).setdefault(group, []).append(record)
    out: dict[str, dict[str, GroupScores]] = {}
    for axis in BREAKDOWN_AXES:
        if axis not in groups:
            continue
        order = list(QUESTION_FORMS) if axis == "form" else sorted(groups[axis])
        out[axis] = {}
        for group in order:
            mine = groups[axis].get(group, [])
            if not mine:
                continue
            by_mode: Counter[str] = Counter()
            for r in mine:
                by_mode.update(r.cost.calls_by_mode)
            out[axis][group] = GroupScores(
                n=len(mine),
                metrics=_metric_means(mine, names)[0],
                retrieval_turns=_mean([float(r.cost.retrieval_turns) for r in mine]),
                calls_by_mode=dict(sorted(by_mode.items())),
            )
    return out


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
    metrics, counts = _metric_means(records, names)

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
        breakdown=breakdown(records, names),
    )
