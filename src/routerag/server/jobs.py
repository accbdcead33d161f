"""Background runs: one or more strategy configurations answering the same questions in worker
threads, which clients can poll, page through, compare and cancel.

A run with one configuration is a plain batch; with two or more it is a *comparison*: every
configuration answers every question (interleaved, so all progress together), each answer is
scored with :func:`routerag.eval.runner.evaluate_question` and each configuration is summarised
with :func:`routerag.eval.summary.summarize` — the same code as ``routerag eval``. The report
lists per-question disagreements (different normalised answers or different EM).

Runs live in memory (the most recent ``keep`` finished ones); with a ``store_dir`` every finished
run is also stored there and read back on start, for the run browser: ``<run_id>.json`` holds its
status and questions, and ``<run_id>/<n>/`` each configuration's answers in the run format of
``routerag eval`` (``run.json``, ``results.jsonl``, ``summary.json``; :mod:`routerag.eval.runs`),
so ``routerag report`` reads a service run as it reads an evaluation.
"""

from __future__ import annotations

import logging
import platform
import shutil
import sys
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from routerag import __version__
from routerag.config import atomic_write_text
from routerag.corpus.normalize import normalize_answer
from routerag.corpus.schema import Question
from routerag.eval.metrics import DEFAULT_METRICS
from routerag.eval.runner import evaluate_question, failed_trace, record_question
from routerag.eval.runs import QuestionRecord, RunDir, RunError, RunHeader, Versions
from routerag.eval.summary import RunSummary, summarize
from routerag.runtime.base import Strategy
from routerag.trace import Trace

log = logging.getLogger(__name__)

RunState = Literal["queued", "running", "done", "cancelled", "failed"]
_RUN_ID = "0123456789abcdef"


class RunQuestion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1)
    qid: str | None = None
    answers: list[str] = Field(default_factory=list, description="gold answers; with them EM/F1 are computed")


class ConfigInfo(BaseModel):
    label: str
    strategy: str
    params: dict[str, Any]  # resolved (validated, with defaults)
    sources: list[str] = Field(default_factory=list)  # custom sources mounted
    adapter: str | None = None  # the policy adapter that answers (name@sha256:prefix)


class RunStatus(BaseModel):
    run_id: str
    strategy: str  # the first configuration's strategy
    params: dict[str, Any]  # the first configuration's params
    configs: list[ConfigInfo]
    dataset: str | None = None
    n_questions: int
    state: RunState
    total: int  # questions x configurations
    done: int  # answers finished (including ones whose trace has an error)
    errors: int  # traces with ``error`` set
    skipped: int  # answers not run because the run was cancelled
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    error: str | None = None  # why the run failed (state "failed")


class ConfigSummary(BaseModel):
    """One row of the comparison table."""

    label: str
    strategy: str
    n_done: int
    n_errors: int
    em: float | None  # None: no question has gold answers
    f1: float | None
    latency_ms: float
    total_tokens: float
    retrieval_turns: float
    summary: RunSummary


class Answer(BaseModel):
    label: str
    prediction: str | None  # None: not answered (yet, or skipped)
    em: float | None = None
    f1: float | None = None
    latency_ms: float | None = None
    tokens: int | None = None
    turns: int | None = None
    error: str | None = None


class QuestionRow(BaseModel):
    position: int
    qid: str
    question: str
    golds: list[str]
    answers: list[Answer]
    disagree: bool  # the configurations answered differently (normalised) or scored different EM


class RunReport(BaseModel):
    status: RunStatus
    summaries: list[ConfigSummary]
    questions: list[QuestionRow]
    disagreements: int


class UnknownRunError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


@dataclass
class RunConfig:
    """A validated configuration; ``make()`` builds a fresh strategy (one per answer)."""

    info: ConfigInfo
    make: Callable[[], Strategy]


@dataclass
class _Run:
    status: RunStatus
    questions: list[Question]
    records: list[list[QuestionRecord | None]]  # [config][question]
    cancel: threading.Event = field(default_factory=threading.Event)


class _Persisted(BaseModel):
    """``<run_id>.json``: the status and the questions; the answers are in the run directories."""

    status: RunStatus
    questions: list[Question]
    records: list[list[QuestionRecord | None]] | None = None  # only in files stored before the run directories


def _versions() -> Versions:
    return Versions(routerag=__version__, python=sys.version.split()[0], platform=platform.platform())


def run_header(status: RunStatus, info: ConfigInfo, questions: list[Question]) -> RunHeader:
    """One configuration of a service run as a run of ``routerag eval`` (its ``run.json``)."""
    return RunHeader(name=status.run_id, dataset=status.dataset or "custom", strategy=info.strategy,
                     label=info.label, metrics=list(DEFAULT_METRICS), sample_qids=[q.qid for q in questions],
                     fingerprint=status.run_id, versions=_versions())


def to_question(q: RunQuestion, position: int, dataset: str = "") -> Question:
    return Question(qid=q.qid or f"q{position}", question=q.question, answers=q.answers, dataset=dataset)


class RunManager:
    """Owns the worker threads and every run's state."""

    def __init__(self, workers: int = 1, keep: int = 100, store_dir: Path | None = None) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="routerag-run")
        self._keep = keep
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        self._lock = threading.Lock()
        self._store = store_dir
        if store_dir is not None:
            store_dir.mkdir(parents=True, exist_ok=True)
            self._load()

    # ------------------------------------------------------------------ submit & work
    def submit(self, configs: list[RunConfig], questions: list[Question], dataset: str | None = None) -> RunStatus:
        if not configs:
            raise ValueError("a run needs at least one configuration")
        seen: set[str] = set()
        for q in questions:
            if q.qid in seen:
                raise ValueError(f"question id {q.qid!r} appears twice")
            seen.add(q.qid)
        run_id = uuid.uuid4().hex[:16]
        first = configs[0].info
        status = RunStatus(run_id=run_id, strategy=first.strategy, params=first.params, configs=[c.info for c in configs],
                           dataset=dataset, n_questions=len(questions), state="queued",
                           total=len(questions) * len(configs), done=0, errors=0, skipped=0, created_at=time.time())
        run = _Run(status=status, questions=questions, records=[[None] * len(questions) for _ in configs])
        with self._lock:
            self._runs[run_id] = run
            self._evict()
        for position, question in enumerate(questions):
            for c, config in enumerate(configs):
                self._pool.submit(self._answer, run, c, position, question, config)
        return status.model_copy()

    def _answer(self, run: _Run, c: int, position: int, question: Question, config: RunConfig) -> None:
        if run.cancel.is_set():
            self._finish_one(run, c, position, None)
            return
        with self._lock:
            if run.status.state == "queued":
                run.status.state = "running"
                run.status.started_at = time.time()
        try:
            strategy = config.make()
            record = evaluate_question(strategy, question, position, strategy_name=config.info.strategy,
                                       metrics=DEFAULT_METRICS)
        except Exception as exc:  # noqa: BLE001 — this answer failed; the run goes on and ends
            record = record_question(failed_trace(question, config.info.strategy, exc), question, position,
                                     metrics=DEFAULT_METRICS)
        self._finish_one(run, c, position, record)

    def _finish_one(self, run: _Run, c: int, position: int, record: QuestionRecord | None) -> None:
        with self._lock:
            s = run.status
            if record is None:
                s.skipped += 1
            else:
                run.records[c][position] = record
                s.done += 1
                s.errors += record.error is not None
            last = s.done + s.skipped == s.total
            if last:
                final = s.model_copy(update={"state": "cancelled" if run.cancel.is_set() and s.skipped else "done",
                                             "finished_at": time.time()})
        if last:
            # saved before it is published, so a client that sees it finished also finds it on disk
            final = self._persist(run, final)
            with self._lock:
                run.status.state, run.status.finished_at, run.status.error = final.state, final.finished_at, final.error
                self._evict()

    # ------------------------------------------------------------------ persistence
    def _persist(self, run: _Run, status: RunStatus) -> RunStatus:
        """Saves a finished run and returns the status to publish: ``failed`` (and saved as such,
        without its answers) when the answers cannot be saved. Never raises: a run always ends."""
        # the last answer is in: nothing of this run changes any more, so no lock is needed
        try:
            if self._store is not None:
                self._write_runs(run, status)
                atomic_write_text(self._status_path(status.run_id),
                                  _Persisted(status=status, questions=run.questions).model_dump_json())
            return status
        except Exception as exc:  # noqa: BLE001 — the reason becomes the run's state
            log.exception("cannot save run %s", status.run_id)
            reason = f"the run's answers could not be saved ({type(exc).__name__}: {exc})"
            failed = status.model_copy(update={"state": "failed", "error": reason.encode("utf-8", "replace").decode()})
        run.questions, run.records = [], [[] for _ in status.configs]  # what is kept is what is stored
        if self._store is not None:
            try:
                shutil.rmtree(self._store / status.run_id, ignore_errors=True)
                atomic_write_text(self._status_path(status.run_id),
                                  _Persisted(status=failed, questions=[]).model_dump_json())
            except Exception:  # noqa: BLE001
                log.exception("cannot save failed run %s", status.run_id)
        return failed

    def _status_path(self, run_id: str) -> Path:
        assert self._store is not None
        return self._store / f"{run_id}.json"

    def _run_dir(self, run_id: str, config: int) -> RunDir:
        assert self._store is not None
        return RunDir(self._store / run_id / str(config))

    def _write_runs(self, run: _Run, status: RunStatus) -> None:
        """Each configuration's answers as a run directory of ``routerag eval``'s format."""
        for c, (info, records) in enumerate(zip(status.configs, run.records)):
            run_dir = self._run_dir(status.run_id, c)
            header = run_header(status, info, run.questions)
            done = [r for r in records if r is not None]
            run_dir.path.mkdir(parents=True, exist_ok=True)
            run_dir.results.rewrite(done)
            atomic_write_text(run_dir.summary_path, summarize(header, done).model_dump_json(indent=2))
            run_dir.write_header(header)  # last: a folder with a header is a complete run

    def _read_runs(self, saved: _Persisted) -> list[list[QuestionRecord | None]]:
        if saved.records is not None:
            return saved.records
        records: list[list[QuestionRecord | None]] = []
        for c in range(len(saved.status.configs)):
            per_config: list[QuestionRecord | None] = [None] * len(saved.questions)
            run_dir = self._run_dir(saved.status.run_id, c)
            if run_dir.exists():
                for record in run_dir.read_records():
                    if 0 <= record.position < len(per_config):
                        per_config[record.position] = record
            records.append(per_config)
        return records

    def _load(self) -> None:
        assert self._store is not None
        files = sorted(self._store.glob("*.json"), key=lambda p: p.stat().st_mtime)[-self._keep :]
        for path in files:
            if len(path.stem) != 16 or set(path.stem) - set(_RUN_ID):
                continue
            try:
                saved = _Persisted.model_validate_json(path.read_text(encoding="utf-8"))
                records = self._read_runs(saved)
            except (ValidationError, OSError, ValueError, RunError) as exc:
                log.warning("skipping saved run %s: %s", path, exc)
                continue
            self._runs[saved.status.run_id] = _Run(status=saved.status, questions=saved.questions, records=records)

    def _evict(self) -> None:
        finished = [rid for rid, r in self._runs.items() if r.status.finished_at is not None]
        for rid in finished[: max(0, len(finished) - self._keep)]:
            del self._runs[rid]
            if self._store is not None:
                self._status_path(rid).unlink(missing_ok=True)
                shutil.rmtree(self._store / rid, ignore_errors=True)

    # ------------------------------------------------------------------ reading
    def _get(self, run_id: str) -> _Run:
        try:
            return self._runs[run_id]
        except KeyError:
            raise UnknownRunError(f"no run {run_id!r} (finished runs are kept, {self._keep} at most)") from None

    def status(self, run_id: str) -> RunStatus:
        with self._lock:
            return self._get(run_id).status.model_copy()

    def list(self) -> list[RunStatus]:
        with self._lock:
            return [r.status.model_copy() for r in reversed(self._runs.values())]

    def traces(self, run_id: str, offset: int = 0, limit: int = 100, config: int | None = None) -> list[Trace]:
        """Finished traces, configuration by configuration, in question order (unanswered left out)."""
        with self._lock:
            run = self._get(run_id)
            chosen = run.records if config is None else run.records[config : config + 1]
            done = [r.trace for per_config in chosen for r in per_config if r is not None]
        return done[offset : offset + limit]

    def report(self, run_id: str) -> RunReport:
        with self._lock:
            run = self._get(run_id)
            status = run.status.model_copy()
            records = [list(per) for per in run.records]
            questions = list(run.questions)
        summaries = []
        for info, per_config in zip(status.configs, records):
            done = [r for r in per_config if r is not None]
            summary = summarize(run_header(status, info, questions), done)
            graded = summary.metric_counts.get("em", 0) > 0
            summaries.append(ConfigSummary(
                label=info.label, strategy=info.strategy, n_done=summary.n_done, n_errors=summary.n_errors,
                em=summary.metrics.get("em") if graded else None, f1=summary.metrics.get("f1") if graded else None,
                latency_ms=summary.cost.latency_ms, total_tokens=summary.cost.total_tokens,
                retrieval_turns=summary.cost.retrieval_turns, summary=summary,
            ))
        rows = []
        for position, q in enumerate(questions):
            answers = []
            for info, per_config in zip(status.configs, records):
                r = per_config[position]
                if r is None:
                    answers.append(Answer(label=info.label, prediction=None))
                    continue
                answers.append(Answer(label=info.label, prediction=r.prediction, em=r.metrics.get("em"),
                                      f1=r.metrics.get("f1"), latency_ms=round(r.cost.latency_ms, 1),
                                      tokens=r.cost.total_tokens, turns=r.cost.retrieval_turns, error=r.error))
            finished = [a for a in answers if a.prediction is not None]
            disagree = len(finished) > 1 and (
                len({normalize_answer(a.prediction or "") for a in finished}) > 1
                or len({a.em for a in finished}) > 1
            )
            rows.append(QuestionRow(position=position, qid=q.qid, question=q.question, golds=list(q.answers),
                                    answers=answers, disagree=disagree))
        return RunReport(status=status, summaries=summaries, questions=rows,
                         disagreements=sum(r.disagree for r in rows))

    # ------------------------------------------------------------------ control
    def cancel(self, run_id: str) -> RunStatus:
        """Answers not yet started are skipped; the ones running finish."""
        with self._lock:
            run = self._get(run_id)
            if run.status.finished_at is None:
                run.cancel.set()
            return run.status.model_copy()

    def shutdown(self) -> None:
        with self._lock:
            for run in self._runs.values():
                run.cancel.set()
        self._pool.shutdown(wait=True, cancel_futures=False)
