"""The evaluation runner: answer every sampled question once, score it, append it to the run's
log, and survive crashes.

It takes already-built objects — a factory of :class:`~routerag.runtime.base.Strategy`
instances and the list of :class:`~routerag.corpus.schema.Question` — so it is testable without a
model or an index; the ``routerag eval`` command builds those from the configuration.

Resuming: the results log is recovered (a partial last line from a crash is cut), finished qids
are skipped, the rest run. A question whose strategy raises is recorded with the error and the run
goes on; ``KeyboardInterrupt`` stops the run after writing a partial summary.

Engines: how the questions left to answer are answered; whichever runs, the calling thread is the
one writer of the log (:func:`run_evaluation`'s ``finish``), so records, resume checks and the
summary are the same code for all. ``thread`` (the default): in the calling thread, or with
``concurrency > 1`` on a thread pool (for served models), each worker thread building its own
strategy instance. ``ray``: a Ray Data pipeline over a pool of ``concurrency`` actors
(:mod:`routerag.eval.ray_runner`), each building its strategy once; their records stream back
to the caller. A run started by one engine resumes with the other.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, Field

from routerag.config import atomic_write_text, fingerprint
from routerag.corpus.question_types import dataset_type
from routerag.corpus.sampling import spread_order
from routerag.corpus.schema import Question
from routerag.eval.cost import trace_cost
from routerag.eval.metrics import DEFAULT_METRICS, METRICS, LLMJudge, check_schemes, score_answer
from routerag.eval.provenance import collect_versions
from routerag.eval.routing import routing_outcome
from routerag.eval.runs import QuestionRecord, RecoveryReport, RunDir, RunError, RunHeader, Versions
from routerag.eval.summary import RunSummary, summarize
from routerag.runtime.base import Strategy
from routerag.runtime.failure import record_failure
from routerag.trace import Trace

log = logging.getLogger(__name__)

StrategyFactory = Callable[[], Strategy]
Answer = Callable[[Strategy, Question, int], QuestionRecord]  # evaluate_question with the run's settings
QuestionOrder = Literal["spread", "sample"]
Engine = Literal["thread", "ray"]
ENGINES: tuple[str, ...] = get_args(Engine)


class RunSpec(BaseModel):
    """What identifies a run (the CLI fills it from the resolved configuration)."""

    name: str
    dataset: str
    strategy: str
    label: str | None = None  # row name in reports; defaults to the strategy
    metrics: list[str] = Field(default_factory=lambda: list(DEFAULT_METRICS))
    fingerprint: str | None = None  # of the configuration; None: derived from this spec alone
    versions: Versions | None = None


class RunOutcome(BaseModel):
    summary: RunSummary
    recovery: RecoveryReport
    skipped: int  # finished in an earlier session
    ran: int  # answered now
    retried_errors: int = 0


def evaluate_question(
    strategy: Strategy,
    question: Question,
    position: int,
    *,
    strategy_name: str,
    metrics: Sequence[str],
    judge: LLMJudge | None = None,
) -> QuestionRecord:
    """Answer and score one question. Exceptions of the strategy become the record's error. The one
    per-question function of every evaluation path: ``routerag eval`` (thread pool or Ray actors)
    and the service's runs (``server/jobs.py``)."""
    t0 = time.perf_counter()
    try:
        trace = strategy.run(question)
    except Exception as exc:  # noqa: BLE001 - one question's failure must not end the run
        trace = failed_trace(question, strategy_name, exc)
    if trace.latency_ms <= 0:
        trace.latency_ms = (time.perf_counter() - t0) * 1000.0
    return record_question(trace, question, position, metrics=metrics, judge=judge)


def failed_trace(question: Question, strategy_name: str, exc: BaseException) -> Trace:
    """The trace of a question whose strategy could not answer (it raised, or could not be built)."""
    return record_failure(Trace(question=question.question, strategy=strategy_name, qid=question.qid), exc)


def record_question(trace: Trace, question: Question, position: int, *, metrics: Sequence[str],
                    judge: LLMJudge | None = None) -> QuestionRecord:
    """The record of one answered question: its trace scored against the gold answers."""
    prediction = trace.answer or ""
    scores: dict[str, float | None]
    judge_raw = None
    if question.answers:
        scores = dict(score_answer(prediction, question.answers, metrics, question.answer_scheme))
        if judge is not None:
            result = judge.judge(question.question, prediction, question.answers)
            scores["judge"] = result.score
            judge_raw = result.raw
    else:
        scores = {name: None for name in metrics}
    return QuestionRecord(
        position=position,
        qid=question.qid,
        question=question.question,
        dataset=question.dataset,
        golds=list(question.answers),
        answer_scheme=question.answer_scheme,
        gold_source=question.gold_source,
        question_type=dataset_type(question.qid, question.metadata),
        prediction=prediction,
        metrics=scores,
        cost=trace_cost(trace),
        routing=routing_outcome(trace, question.gold_source),
        error=trace.error,
        judge_raw=judge_raw,
        trace=trace,
    )


class _Running:
    """Running means for the progress bar."""

    def __init__(self, records: Sequence[QuestionRecord]) -> None:
        self.n = 0
        self.em = 0.0
        self.f1 = 0.0
        self.errors = 0
        for record in records:
            self.add(record)

    def add(self, record: QuestionRecord) -> None:
        self.n += 1
        self.em += record.metrics.get("em") or 0.0
        self.f1 += record.metrics.get("f1") or 0.0
        self.errors += bool(record.error)

    def text(self) -> str:
        if not self.n:
            return "EM  -    F1  -  "
        return f"EM {100 * self.em / self.n:5.1f} F1 {100 * self.f1 / self.n:5.1f} err {self.errors}"


@contextmanager
def _progress(enabled: bool, total: int, done: int, running: _Running) -> Iterator[Callable[[], None]]:
    if not enabled:
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[scores]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
    )
    with progress:
        task = progress.add_task("eval", total=total, completed=done, scores=running.text())

        def advance() -> None:
            progress.update(task, advance=1, scores=running.text())

        yield advance


def _positions(n: int, order: QuestionOrder) -> list[int]:
    if order == "spread":
        return spread_order(n)
    if order == "sample":
        return list(range(n))
    raise ValueError(f"unknown question order {order!r}; valid: spread, sample")


def _check_unique(questions: Sequence[Question]) -> None:
    seen: set[str] = set()
    for q in questions:
        if q.qid in seen:
            raise ValueError(f"question id {q.qid!r} occurs twice in the sample; qids must be unique")
        seen.add(q.qid)


def _open_header(run_dir: RunDir, spec: RunSpec, questions: Sequence[Question]) -> RunHeader:
    qids = [q.qid for q in questions]
    print_ = spec.fingerprint or fingerprint({"dataset": spec.dataset, "strategy": spec.strategy, "metrics": spec.metrics})
    header = RunHeader(
        name=spec.name,
        dataset=spec.dataset,
        strategy=spec.strategy,
        label=spec.label or spec.strategy,
        metrics=list(spec.metrics),
        sample_qids=qids,
        fingerprint=print_,
        versions=spec.versions or collect_versions(),
    )
    if not run_dir.exists():
        run_dir.check_adoptable()
        run_dir.write_header(header)
        return header
    stored = run_dir.read_header()
    if stored.fingerprint != header.fingerprint:
        raise RunError(
            f"{run_dir.path} holds a run with another configuration (fingerprint {stored.fingerprint} != "
            f"{header.fingerprint}); choose another --out to start a new run"
        )
    if stored.sample_qids != qids:
        raise RunError(
            f"{run_dir.path} sampled other questions ({len(stored.sample_qids)} stored vs {len(qids)} now; "
            "--limit or the dataset changed); choose another --out"
        )
    return stored


def open_results(run_dir: RunDir) -> tuple[RecoveryReport, dict[str, QuestionRecord]]:
    """Ready a run's results log for appending: a partial last line (a crash mid-write) is cut;
    returns what was repaired and the finished records by qid (the first of each). Resuming
    ``routerag eval`` and a service run both start here."""
    log_ = run_dir.results
    recovery = log_.recover()
    if recovery.repaired:
        log.info(recovery.message(log_.path))
    by_qid: dict[str, QuestionRecord] = {}
    for record in log_.read():
        by_qid.setdefault(record.qid, record)
    return recovery, by_qid


def write_summary(run_dir: RunDir, header: RunHeader) -> RunSummary:
    summary = summarize(header, run_dir.read_records())
    atomic_write_text(run_dir.summary_path, summary.model_dump_json(indent=2))
    return summary


def run_evaluation(
    spec: RunSpec,
    questions: Sequence[Question],
    strategy_factory: StrategyFactory,
    out_dir: str | Path,
    *,
    judge: LLMJudge | None = None,
    concurrency: int = 1,
    progress: bool = False,
    retry_errors: bool = False,
    order: QuestionOrder = "spread",
    engine: Engine = "thread",
    actor_cpus: float = 1.0,
) -> RunOutcome:
    """Run (or resume) an evaluation into ``out_dir``; see the module docstring. ``order``:
    ``spread`` answers the sample in bit-reversed order, so that the questions finished before an
    interruption are spread over the whole sample (a partial run estimates the full one without
    the bias of the file's head); ``sample`` answers them in sample order. Results are the same.
    ``engine="ray"``: ``concurrency`` Ray actors of ``actor_cpus`` CPUs each answer the questions;
    ``strategy_factory`` and ``judge`` are sent to them, so they must pickle (see
    :mod:`routerag.eval.ray_runner`)."""
    for name in spec.metrics:
        METRICS.get(name)  # unknown names fail here, listing the valid ones
    check_schemes(q.answer_scheme for q in questions)
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; valid: {', '.join(ENGINES)}")
    if engine == "ray":
        from routerag.raycluster import require_ray

        require_ray()  # before anything is written: a clear error without the scale extra
    _check_unique(questions)
    run_dir = RunDir(out_dir)
    with run_dir.lock():
        header = _open_header(run_dir, spec, questions)
        log_ = run_dir.results
        recovery, by_qid = open_results(run_dir)  # the caller reports a repair (RunOutcome.recovery), once
        retried = 0
        if retry_errors and any(r.error for r in by_qid.values()):
            kept = [r for r in by_qid.values() if not r.error]
            retried = len(by_qid) - len(kept)
            log_.rewrite(kept)
            by_qid = {r.qid: r for r in kept}
        todo = [(i, questions[i]) for i in _positions(len(questions), order) if questions[i].qid not in by_qid]
        skipped = len(questions) - len(todo)
        running = _Running(list(by_qid.values()))
        ran = 0
        try:
            with _progress(progress, len(questions), skipped, running) as advance:

                def finish(record: QuestionRecord) -> None:
                    nonlocal ran
                    if record.qid in by_qid:  # an engine delivered it twice (Ray re-running a lost block): once is kept
                        log.warning("question %s was answered twice; the second record is dropped", record.qid)
                        return
                    by_qid[record.qid] = record
                    log_.append(record)
                    running.add(record)
                    ran += 1
                    advance()

                answer: Answer = partial(evaluate_question, strategy_name=spec.strategy, metrics=spec.metrics, judge=judge)
                if engine == "ray":
                    from routerag.eval.ray_runner import run_on_ray

                    run_on_ray(todo, strategy_factory, answer, finish, actors=concurrency, actor_cpus=actor_cpus)
                elif concurrency == 1:
                    strategy = strategy_factory() if todo else None
                    for position, question in todo:
                        finish(answer(strategy, question, position))  # type: ignore[arg-type]
                else:
                    _run_pool(todo, strategy_factory, concurrency, answer, finish)
        finally:
            summary = write_summary(run_dir, header)
        return RunOutcome(summary=summary, recovery=recovery, skipped=skipped, ran=ran, retried_errors=retried)


def _run_pool(
    todo: list[tuple[int, Question]],
    strategy_factory: StrategyFactory,
    concurrency: int,
    answer: Answer,
    finish: Callable[[QuestionRecord], None],
) -> None:
    local = threading.local()

    def work(position: int, question: Question) -> QuestionRecord:
        strategy = getattr(local, "strategy", None)
        if strategy is None:
            strategy = local.strategy = strategy_factory()
        return answer(strategy, question, position)

    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="eval")
    pending: set[Future[QuestionRecord]] = set()
    queue = iter(todo)
    try:
        for position, question in queue:  # keep at most 2x concurrency in flight
            pending.add(pool.submit(work, position, question))
            if len(pending) >= 2 * concurrency:
                break
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            stop: BaseException | None = None
            for future in done:
                exc = future.exception()  # only BaseException (KeyboardInterrupt, ...) gets here
                if exc is not None:
                    stop = stop or exc
                    continue
                finish(future.result())
                nxt = None if stop else next(queue, None)
                if nxt is not None:
                    pending.add(pool.submit(work, *nxt))
            if stop is not None:
                raise stop
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
