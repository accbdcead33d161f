"""What a client reads of a background run (:mod:`routerag.server.jobs`): its finished traces, and
the comparison report — per-configuration EM/F1/latency/tokens/turns (summarised with
:func:`routerag.eval.summary.summarize`, as ``routerag eval`` does) and per-question
disagreements (different normalised answers or different EM)."""

from __future__ import annotations

from collections.abc import Sequence

from routerag.corpus.normalize import normalize_answer
from routerag.corpus.schema import Question
from routerag.eval.runs import QuestionRecord
from routerag.eval.summary import summarize
from routerag.server.run_records import Answer, ConfigInfo, ConfigSummary, QuestionRow, RunReport, RunStatus, run_header
from routerag.trace import Trace

__all__ = ["finished_traces", "run_report"]

Records = Sequence[Sequence[QuestionRecord | None]]  # [config][question]


def finished_traces(records: Records, offset: int = 0, limit: int = 100, config: int | None = None) -> list[Trace]:
    """Finished traces, configuration by configuration, in question order (unanswered left out)."""
    chosen = records if config is None else records[config : config + 1]
    done = [r.trace for per_config in chosen for r in per_config if r is not None]
    return done[offset : offset + limit]


def _summary(status: RunStatus, info: ConfigInfo, questions: Sequence[Question],
             per_config: Sequence[QuestionRecord | None]) -> ConfigSummary:
    done = [r for r in per_config if r is not None]
    summary = summarize(run_header(status, info, questions), done)
    graded = summary.metric_counts.get("em", 0) > 0
    return ConfigSummary(
        label=info.label, strategy=info.strategy, n_done=summary.n_done, n_errors=summary.n_errors,
        em=summary.metrics.get("em") if graded else None, f1=summary.metrics.get("f1") if graded else None,
        latency_ms=summary.cost.latency_ms, total_tokens=summary.cost.total_tokens,
        retrieval_turns=summary.cost.retrieval_turns, summary=summary,
    )


def _answer(info: ConfigInfo, r: QuestionRecord | None) -> Answer:
    if r is None:
        return Answer(label=info.label, prediction=None)
    return Answer(label=info.label, prediction=r.prediction, em=r.metrics.get("em"), f1=r.metrics.get("f1"),
                  latency_ms=round(r.cost.latency_ms, 1), tokens=r.cost.total_tokens, turns=r.cost.retrieval_turns,
                  error=r.error)


def run_report(status: RunStatus, questions: Sequence[Question], records: Records) -> RunReport:
    summaries = [_summary(status, info, questions, per_config) for info, per_config in zip(status.configs, records)]
    rows = []
    for position, q in enumerate(questions):
        answers = [_answer(info, per_config[position]) for info, per_config in zip(status.configs, records)]
        finished = [a for a in answers if a.prediction is not None]
        disagree = len(finished) > 1 and (
            len({normalize_answer(a.prediction or "") for a in finished}) > 1
            or len({a.em for a in finished}) > 1
        )
        rows.append(QuestionRow(position=position, qid=q.qid, question=q.question, golds=list(q.answers),
                                answers=answers, disagree=disagree))
    return RunReport(status=status, summaries=summaries, questions=rows, disagreements=sum(r.disagree for r in rows))
