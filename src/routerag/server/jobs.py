"""Background runs: a batch of questions answered by one strategy in worker threads, which
clients can poll, page through and cancel. Runs are kept in memory; the most recent
``keep`` finished runs survive."""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from routerag.corpus.schema import Question
from routerag.strategies.base import Strategy
from routerag.trace import Trace

RunState = Literal["queued", "running", "done", "cancelled"]


class RunQuestion(BaseModel):
    question: str = Field(min_length=1)
    qid: str | None = None


class RunStatus(BaseModel):
    run_id: str
    strategy: str
    params: dict[str, Any]
    state: RunState
    total: int
    done: int  # questions answered (including ones whose trace has an error)
    errors: int  # traces with ``error`` set
    skipped: int  # questions not run because the run was cancelled
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None


class UnknownRunError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


@dataclass
class _Run:
    status: RunStatus
    traces: list[Trace | None]
    cancel: threading.Event = field(default_factory=threading.Event)


class RunManager:
    """Owns the worker threads and every run's state. ``make_strategy()`` builds a fresh
    strategy for each question, so questions of one run may be answered concurrently."""

    def __init__(self, workers: int = 1, keep: int = 100) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="routerag-run")
        self._keep = keep
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        self._lock = threading.Lock()

    def submit(self, make_strategy: Callable[[], Strategy], strategy: str, params: dict[str, Any],
               questions: list[RunQuestion]) -> RunStatus:
        run_id = uuid.uuid4().hex[:16]
        status = RunStatus(run_id=run_id, strategy=strategy, params=params, state="queued",
                           total=len(questions), done=0, errors=0, skipped=0, created_at=time.time())
        run = _Run(status=status, traces=[None] * len(questions))
        with self._lock:
            self._runs[run_id] = run
            self._evict()
        for index, question in enumerate(questions):
            self._pool.submit(self._answer, run, index, question, make_strategy)
        return status.model_copy()

    def _answer(self, run: _Run, index: int, question: RunQuestion, make_strategy: Callable[[], Strategy]) -> None:
        if run.cancel.is_set():
            self._finish_one(run, index, None)
            return
        with self._lock:
            if run.status.state == "queued":
                run.status.state = "running"
                run.status.started_at = time.time()
        item: str | Question = question.question
        if question.qid is not None:
            item = Question(qid=question.qid, question=question.question, answers=[])
        try:
            trace = make_strategy().run(item)
        except Exception as exc:  # noqa: BLE001 — strategies record errors themselves; this is a last resort
            trace = Trace(question=question.question, strategy=run.status.strategy, qid=question.qid,
                          error=f"{type(exc).__name__}: {exc}")
        self._finish_one(run, index, trace)

    def _finish_one(self, run: _Run, index: int, trace: Trace | None) -> None:
        with self._lock:
            s = run.status
            if trace is None:
                s.skipped += 1
            else:
                run.traces[index] = trace
                s.done += 1
                s.errors += trace.error is not None
            if s.done + s.skipped == s.total:
                s.state = "cancelled" if run.cancel.is_set() and s.skipped else "done"
                s.finished_at = time.time()
                self._evict()

    def _evict(self) -> None:
        finished = [rid for rid, r in self._runs.items() if r.status.finished_at is not None]
        for rid in finished[: max(0, len(finished) - self._keep)]:
            del self._runs[rid]

    def _get(self, run_id: str) -> _Run:
        try:
            return self._runs[run_id]
        except KeyError:
            raise UnknownRunError(f"no run {run_id!r} (finished runs are kept in memory, {self._keep} at most)") from None

    def status(self, run_id: str) -> RunStatus:
        with self._lock:
            return self._get(run_id).status.model_copy()

    def list(self) -> list[RunStatus]:
        with self._lock:
            return [r.status.model_copy() for r in self._runs.values()]

    def traces(self, run_id: str, offset: int = 0, limit: int = 100) -> list[Trace]:
        """Finished traces in question order (unanswered questions are left out)."""
        with self._lock:
            done = [t for t in self._get(run_id).traces if t is not None]
        return done[offset : offset + limit]

    def cancel(self, run_id: str) -> RunStatus:
        """Questions not yet started are skipped; the ones running finish."""
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
