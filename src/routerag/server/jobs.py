"""Background runs: one or more strategy configurations answering the same questions in worker
threads, which clients can poll, page through, compare and cancel.

A run with one configuration is a plain batch; with two or more it is a *comparison*: every
configuration answers every question (interleaved, so all progress together), each answer is
scored with :func:`routerag.eval.runner.evaluate_question` and each configuration is summarised
with :func:`routerag.eval.summary.summarize` — the same code as ``routerag eval``. The report
lists per-question disagreements (different normalised answers or different EM).

Runs live in memory (the most recent ``keep`` finished ones); with a ``store_dir`` every run is
also stored there as it goes and read back on start: ``<run_id>.json`` holds its status, questions
and the configurations as requested, and ``<run_id>/<n>/`` each configuration's answers in the
run format of ``routerag eval`` (``run.json``, ``results.jsonl``, ``summary.json``;
:mod:`routerag.eval.runs`), so ``routerag report`` reads a service run as it reads an evaluation.
Each answer is appended (fsynced) to ``results.jsonl`` when it finishes, by the runner's own log
writer, so a service killed mid-run (``kill -9``, an OOM kill) loses no finished answer: on the
next start the run is listed as ``interrupted`` with them, and :meth:`RunManager.resume` answers
the rest (the log is recovered as ``routerag eval`` recovers it; no question is answered twice).
On a full disk (:mod:`routerag.server.run_space`) a new run is refused below ``min_free_bytes``
free or when its files cannot be written, and a run whose answer cannot be appended stops there:
it ends ``failed`` with the reason, its saved answers kept and ``done`` counting only those.
A clean shutdown (SIGTERM) cancels the runs in flight and stores them as ``cancelled``. Folders on
disk follow the same bound as memory: the ``keep`` most recent finished or interrupted runs.

Memory: the queue holds runs, not answers (a worker takes the next answer of the oldest run when
it is free), and a run holds its questions packed (:class:`routerag.server.packed.PackedQuestions`).
Cancelling a queued run skips its answers at once. With a ``store_dir``, a run that has ended keeps
only its status in memory: its questions and answers are read back from its files when asked for.
"""

from __future__ import annotations

import logging
import platform
import shutil
import sys
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from routerag import __version__
from routerag.config import atomic_write_text
from routerag.corpus.normalize import normalize_answer
from routerag.corpus.schema import Question
from routerag.edge.admission import Ticket
from routerag.errors import RouteragError
from routerag.eval.metrics import DEFAULT_METRICS
from routerag.eval.runner import evaluate_question, failed_trace, open_results, record_question
from routerag.eval.runs import QuestionRecord, RunDir, RunError, RunHeader, Versions
from routerag.eval.summary import RunSummary, summarize
from routerag.runtime.base import Strategy
from routerag.server.packed import PackedQuestions, give_back_freed_memory
from routerag.server.run_space import RunStoreFullError, RunStoreUnreadableError, check_free_space, store_failure
from routerag.trace import Trace

log = logging.getLogger(__name__)

RunState = Literal["queued", "running", "done", "cancelled", "failed", "interrupted"]
RESUMABLE: tuple[RunState, ...] = ("interrupted", "cancelled")
_RUN_ID = "0123456789abcdef"
_REQUESTS: TypeAdapter[list[dict[str, Any]]] = TypeAdapter(list[dict[str, Any]])


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
    resumed: int = 0  # times the run was resumed (POST /v1/runs/{id}/resume)
    started_at: float | None = None
    finished_at: float | None = None  # set once the run has ended (done, cancelled, failed) or was found interrupted
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


class UnknownRunError(RouteragError, KeyError):
    """No run has this id (the message names it)."""

    def __str__(self) -> str:
        return str(self.args[0])


class RunNotResumableError(RouteragError, ValueError):
    """The run is not interrupted or cancelled (it runs, or it ended with every answer)."""


@dataclass
class PreparedConfig:
    """A validated configuration; ``make()`` builds a fresh strategy (one per answer)."""

    info: ConfigInfo
    make: Callable[[], Strategy]
    request: dict[str, Any] = field(default_factory=dict)  # as the client sent it: rebuilt from it on resume


@dataclass(eq=False)
class _Run:
    status: RunStatus
    questions: PackedQuestions  # packed: a queued run of 5,000 questions is two allocations, freed when it ends
    records: list[list[QuestionRecord | None]]  # [config][question]
    requests: list[dict[str, Any]] = field(default_factory=list)  # PreparedConfig.request of each configuration
    cancel: threading.Event = field(default_factory=threading.Event)
    write_lock: threading.Lock = field(default_factory=threading.Lock)  # one appender per run's logs
    store_error: str | None = None  # the store could not take the run or an answer: the run ends "failed"
    halted: bool = False  # an answer could not be appended: the rest is not run, what is saved is kept
    ticket: Ticket | None = None  # its answers' admission: one unit given back per answer answered or skipped
    configs: tuple[PreparedConfig, ...] = ()  # while it runs: the configurations answering
    next_answer: int = 0  # while it runs: the next answer (position x configurations + configuration) to look at
    in_flight: int = 0  # answers being worked on now
    stored: bool = False  # ended: its questions and answers are on disk only (read back when asked for)


class _Persisted(BaseModel):
    """``<run_id>.json``: the status and the questions; the answers are in the run directories."""

    status: RunStatus
    questions: list[Question]
    requests: list[dict[str, Any]] = Field(default_factory=list)  # the configurations as requested (for resume)
    records: list[list[QuestionRecord | None]] | None = None  # only in files stored before the run directories


def _is_run_id(name: str) -> bool:
    return len(name) == 16 and not set(name) - set(_RUN_ID)


def _versions() -> Versions:
    return Versions(routerag=__version__, python=sys.version.split()[0], platform=platform.platform())


def run_header(status: RunStatus, info: ConfigInfo, questions: Sequence[Question]) -> RunHeader:
    """One configuration of a service run as a run of ``routerag eval`` (its ``run.json``)."""
    return RunHeader(name=status.run_id, dataset=status.dataset or "custom", strategy=info.strategy,
                     label=info.label, metrics=list(DEFAULT_METRICS), sample_qids=[q.qid for q in questions],
                     fingerprint=status.run_id, versions=_versions())


def to_question(q: RunQuestion, position: int, dataset: str = "") -> Question:
    return Question(qid=q.qid or f"q{position}", question=q.question, answers=q.answers, dataset=dataset)


class RunManager:
    """Owns the worker threads and every run's state."""

    def __init__(self, workers: int = 1, keep: int = 100, store_dir: Path | None = None,
                 min_free_bytes: int = 0) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="routerag-run")
        self._workers = workers
        self._drainers = 0  # workers taking answers from the queue now
        self._queue: deque[_Run] = deque()  # runs with answers not yet taken, oldest first
        self._read_back: tuple[str, list[Question], list[list[QuestionRecord | None]]] | None = None
        self._keep = keep
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        self._lock = threading.Lock()
        self._store = store_dir
        self._min_free = min_free_bytes  # a new run is refused with less free space than this in the store
        if store_dir is not None:
            store_dir.mkdir(parents=True, exist_ok=True)
            self._load()

    # ------------------------------------------------------------------ submit & work
    def submit(self, configs: list[PreparedConfig], questions: list[Question], dataset: str | None = None,
               ticket: Ticket | None = None) -> RunStatus:
        """Queue a run. ``ticket`` holds its answers' admission: one unit is given back as each
        answer is answered or skipped."""
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
        run = _Run(status=status, questions=PackedQuestions(questions), records=[[None] * len(questions) for _ in configs],
                   requests=[c.request for c in configs], ticket=ticket)
        if self._store is not None:
            self._store_new(run)
        with self._lock:
            self._runs[run_id] = run
            self._evict()
        self._schedule(run, configs)
        return status.model_copy()

    def _store_new(self, run: _Run) -> None:
        """Open a new run's files, or refuse it (:class:`RunStoreFullError`) when the store has too
        little free space or cannot be written; other failures (text that cannot be written) let it
        run and end "failed" with the reason."""
        assert self._store is not None
        check_free_space(self._store, self._min_free)
        try:
            self._open_store(run)  # before any answer: a crash from here on leaves an interrupted run
        except OSError as exc:
            self._remove_stored(run.status.run_id)
            raise RunStoreFullError(f"the run cannot be stored: {store_failure(exc)}") from None
        except Exception as exc:  # noqa: BLE001 — the run still runs and ends, "failed" with the reason
            log.exception("cannot store run %s", run.status.run_id)
            run.store_error = f"{type(exc).__name__}: {exc}"

    def _schedule(self, run: _Run, configs: Sequence[PreparedConfig]) -> None:
        """Queue the run for every answer it does not have yet (all of them for a new run). The
        queue holds runs, not answers: a worker takes a run's next answer when it is free, so a
        cancelled run leaves nothing behind in it."""
        with self._lock:
            run.configs, run.next_answer = tuple(configs), 0
            self._queue.append(run)
            while self._drainers < self._workers:
                self._drainers += 1
                self._pool.submit(self._drain)

    def _take(self) -> tuple[_Run, int, int] | None:
        """The next answer to work on: (run, configuration, question position); call with the lock held."""
        while self._queue:
            run = self._queue[0]
            n_configs = len(run.configs)
            total = len(run.questions) * n_configs
            while run.next_answer < total:
                position, c = divmod(run.next_answer, n_configs)
                run.next_answer += 1
                if run.records[c][position] is None:
                    run.in_flight += 1
                    if run.status.state == "queued":
                        run.status.state = "running"
                        run.status.started_at = time.time()
                    return run, c, position
            self._queue.popleft()  # every answer of it is taken
        return None

    def _drain(self) -> None:
        """A worker: answers the queue's next answer until the queue is empty."""
        try:
            self._drain_queue()
        except BaseException:  # something unforeseen: a later run still gets a worker
            with self._lock:
                self._drainers -= 1
            raise

    def _drain_queue(self) -> None:
        while True:
            with self._lock:
                taken = self._take()
                if taken is None:  # counted out under the same lock as the look: _schedule sees it
                    self._drainers -= 1
                    return
            run, c, position = taken
            config, question = run.configs[c], run.questions[position]
            try:
                strategy = config.make()
                record = evaluate_question(strategy, question, position, strategy_name=config.info.strategy,
                                           metrics=DEFAULT_METRICS)
            except Exception as exc:  # noqa: BLE001 — this answer failed; the run goes on and ends
                record = record_question(failed_trace(question, config.info.strategy, exc), question, position,
                                         metrics=DEFAULT_METRICS)
            self._finish_one(run, c, position, record)

    def _finish_one(self, run: _Run, c: int, position: int, record: QuestionRecord) -> None:
        saved = self._save_answer(run, c, record)
        with self._lock:
            s = run.status
            run.in_flight -= 1
            released = 1
            if saved:
                run.records[c][position] = record
                s.done += 1
                s.errors += record.error is not None
            else:  # not on disk, so not done: the run stops with what it has saved
                s.skipped += 1
                released += self._halt(run)
            final = self._final_if_last(run)
        if run.ticket is not None:
            run.ticket.release(released)
        if final is not None:
            self._complete(run, final)

    def _save_answer(self, run: _Run, c: int, record: QuestionRecord) -> bool:
        """Append a finished answer to its log (before it is counted: what a client sees done is on
        disk); False when it is not saved: the store failed now or on an earlier answer."""
        if self._store is None or (run.store_error is not None and not run.halted):
            return True  # no store, or one that never took the run: the answers live in memory
        if run.halted:
            return False
        try:
            with run.write_lock:
                self._run_dir(run.status.run_id, c).results.append(record)
            return True
        except Exception as exc:  # noqa: BLE001 — the run stops and ends "failed" with the reason
            log.exception("cannot append an answer of run %s", run.status.run_id)
            run.store_error = store_failure(exc)
            return False

    def _halt(self, run: _Run) -> int:
        """Stop a run whose store failed: the answers not taken yet are skipped (their number is
        returned); call with the lock held."""
        if run.halted:
            return 0
        run.halted = True
        run.cancel.set()
        self._queue = deque(r for r in self._queue if r is not run)
        s = run.status
        skipped = s.total - s.done - s.skipped - run.in_flight
        s.skipped += skipped
        return skipped

    def _final_if_last(self, run: _Run) -> RunStatus | None:
        """The run's final status when its last answer is in (call with the lock held)."""
        s = run.status
        if s.done + s.skipped != s.total or run.in_flight:
            return None
        if run.halted:
            reason = (f"{run.store_error}; the run stopped with {s.done} of {s.total} answers saved "
                      "(they are kept; the rest were not run)")
            return s.model_copy(update={"state": "failed", "error": reason, "finished_at": time.time()})
        return s.model_copy(update={"state": "cancelled" if run.cancel.is_set() and s.skipped else "done",
                                    "finished_at": time.time()})

    def _complete(self, run: _Run, final: RunStatus) -> None:
        """Store a run that has ended, then publish its final status and drop what memory held for
        it (its questions and answers, read back from disk when asked for; a run without a store
        keeps them)."""
        # saved before it is published, so a client that sees it finished also finds it on disk
        final = self._persist(run, final)
        if run.ticket is not None:
            run.ticket.release()
        with self._lock:
            run.status.state, run.status.finished_at, run.status.error = final.state, final.finished_at, final.error
            run.configs, run.ticket = (), None
            if self._store is not None:
                run.questions, run.records, run.stored = PackedQuestions(), [], True
            self._evict()
        give_back_freed_memory()

    # ------------------------------------------------------------------ persistence
    def _persist(self, run: _Run, status: RunStatus) -> RunStatus:
        """Saves a finished run and returns the status to publish: ``failed`` (and saved as such,
        without its answers) when the answers cannot be saved. Never raises: a run always ends."""
        # the last answer is in: nothing of this run changes any more, so no lock is needed
        if run.halted:
            self._persist_halted(run, status)
            return status
        try:
            if self._store is not None:
                if run.store_error is not None:
                    raise RunError(run.store_error)
                self._write_runs(run, status)
                self._write_status(run, status)
            return status
        except Exception as exc:  # noqa: BLE001 — the reason becomes the run's state
            log.exception("cannot save run %s", status.run_id)
            reason = f"the run's answers could not be saved ({type(exc).__name__}: {exc})"
            failed = status.model_copy(update={"state": "failed", "error": reason.encode("utf-8", "replace").decode()})
        run.questions, run.records = PackedQuestions(), [[] for _ in status.configs]  # what is kept is what is stored
        if self._store is not None:
            try:
                shutil.rmtree(self._store / status.run_id, ignore_errors=True)
                atomic_write_text(self._status_path(status.run_id),
                                  _Persisted(status=failed, questions=[]).model_dump_json())
            except Exception:  # noqa: BLE001
                log.exception("cannot save failed run %s", status.run_id)
        return failed

    def _persist_halted(self, run: _Run, status: RunStatus) -> None:
        """A run stopped by its store: its logs hold what was saved and stay as they are; the
        summaries and the failed status are written if the disk takes them (if not, the status
        file written when it was accepted stays, and the next start lists the run as interrupted)."""
        for c, (info, records) in enumerate(zip(status.configs, run.records)):
            header = run_header(status, info, run.questions)
            try:
                done = [r for r in records if r is not None]
                atomic_write_text(self._run_dir(status.run_id, c).summary_path, summarize(header, done).model_dump_json())
            except Exception:  # noqa: BLE001 — the log is what counts; the summary is recomputed on read
                log.warning("cannot write the summary of stopped run %s", status.run_id)
        try:
            self._write_status(run, status)
        except Exception:  # noqa: BLE001
            log.warning("cannot store the failed status of run %s", status.run_id)

    def _write_status(self, run: _Run, status: RunStatus) -> None:
        """``<run_id>.json`` (a :class:`_Persisted`), written with the packed questions as they are."""
        requests = _REQUESTS.dump_json(run.requests).decode()
        questions = run.questions.json_array().decode("utf-8", "surrogatepass")  # not UTF-8: the write fails, the run ends "failed"
        text = f'{{"status":{status.model_dump_json()},"questions":{questions},"requests":{requests}}}'
        atomic_write_text(self._status_path(status.run_id), text)

    def _open_store(self, run: _Run) -> None:
        """The status file (state ``queued``), then each configuration's run directory with its
        header, as ``routerag eval`` opens one; answers are appended to it as they finish."""
        status = run.status
        self._write_status(run, status)
        for c, info in enumerate(status.configs):
            run_dir = self._run_dir(status.run_id, c)
            run_dir.path.mkdir(parents=True, exist_ok=True)
            if not run_dir.exists():
                run_dir.write_header(run_header(status, info, run.questions))

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
            run_dir.results.rewrite(done)  # the appended log, in question order
            atomic_write_text(run_dir.summary_path, summarize(header, done).model_dump_json(indent=2))
            if not run_dir.exists():
                run_dir.write_header(header)

    def _read_runs(self, saved: _Persisted) -> list[list[QuestionRecord | None]]:
        if saved.records is not None:
            return saved.records
        position = {q.qid: i for i, q in enumerate(saved.questions)}
        records: list[list[QuestionRecord | None]] = []
        for c in range(len(saved.status.configs)):
            per_config: list[QuestionRecord | None] = [None] * len(saved.questions)
            run_dir = self._run_dir(saved.status.run_id, c)
            if run_dir.exists():
                for record in run_dir.read_records():  # a damaged tail is left for resume to cut
                    i = position.get(record.qid)
                    if i is not None and per_config[i] is None:
                        per_config[i] = record
            records.append(per_config)
        return records

    def _interrupted(self, saved: _Persisted, records: list[list[QuestionRecord | None]]) -> RunStatus:
        """A run stored as queued or running: the process died under it. It ended when its files last changed."""
        done = [r for per_config in records for r in per_config if r is not None]
        run_id = saved.status.run_id
        paths = [self._status_path(run_id)] + [self._run_dir(run_id, c).results.path for c in range(len(records))]
        ended = max(p.stat().st_mtime for p in paths if p.exists())
        return saved.status.model_copy(update={"state": "interrupted", "done": len(done), "skipped": 0,
                                               "errors": sum(r.error is not None for r in done), "finished_at": ended})

    def _load(self) -> None:
        """Read the stored runs back: the ``keep`` most recent; older ones, and folders without a
        status file (a run whose removal was cut short), are removed from disk."""
        assert self._store is not None
        files = [p for p in self._store.glob("*.json") if _is_run_id(p.stem)]
        files.sort(key=lambda p: p.stat().st_mtime)
        old, files = files[: max(0, len(files) - self._keep)], files[-self._keep :]
        for path in old:
            self._remove_stored(path.stem)
        stored = {p.stem for p in files}
        for folder in self._store.iterdir():
            if folder.is_dir() and _is_run_id(folder.name) and folder.name not in stored:
                shutil.rmtree(folder, ignore_errors=True)
        for path in files:
            try:
                saved = _Persisted.model_validate_json(path.read_text(encoding="utf-8"))
                records = self._read_runs(saved)
            except (ValidationError, OSError, ValueError, RunError) as exc:
                log.warning("skipping saved run %s: %s", path, exc)
                continue
            status = saved.status
            if status.finished_at is None:
                status = self._interrupted(saved, records)
                log.warning("run %s was interrupted with %d of %d answers; POST /v1/runs/%s/resume continues it",
                            status.run_id, status.done, status.total, status.run_id)
            # only the status stays in memory: questions and answers are read back when asked for
            self._runs[status.run_id] = _Run(status=status, questions=PackedQuestions(), records=[], requests=saved.requests,
                                             stored=True)

    def _remove_stored(self, run_id: str) -> None:
        assert self._store is not None
        self._status_path(run_id).unlink(missing_ok=True)  # first: a folder without it is removed on the next start
        shutil.rmtree(self._store / run_id, ignore_errors=True)

    def _evict(self) -> None:
        finished = [rid for rid, r in self._runs.items() if r.status.finished_at is not None]
        for rid in finished[: max(0, len(finished) - self._keep)]:
            del self._runs[rid]
            if self._read_back is not None and self._read_back[0] == rid:
                self._read_back = None
            if self._store is not None:
                self._remove_stored(rid)

    # ------------------------------------------------------------------ reading
    def _get(self, run_id: str) -> _Run:
        try:
            return self._runs[run_id]
        except KeyError:
            raise UnknownRunError(f"no run {run_id!r} (finished runs are kept, {self._keep} at most)") from None

    def _contents(self, run_id: str) -> tuple[RunStatus, Sequence[Question], list[list[QuestionRecord | None]]]:
        """A run's status, questions and answers: from memory while it runs, else read back from its
        files (the last one read is kept, so paging through its traces reads it once)."""
        with self._lock:
            run = self._get(run_id)
            status = run.status.model_copy()
            if not run.stored:
                return status, run.questions, [list(per) for per in run.records]  # packed questions never change
            cached = self._read_back
            if cached is not None and cached[0] == run_id:
                return status, cached[1], cached[2]
        saved, records = self._read_back_run(run_id)
        with self._lock:
            if self._runs.get(run_id) is run and run.stored:
                self._read_back = (run_id, saved.questions, records)
        return status, saved.questions, records

    def _read_back_run(self, run_id: str) -> tuple[_Persisted, list[list[QuestionRecord | None]]]:
        """A stored run's questions and answers, or :class:`RunStoreUnreadableError` saying why not."""
        try:
            saved = _Persisted.model_validate_json(self._status_path(run_id).read_text(encoding="utf-8"))
            return saved, self._read_runs(saved)
        except (OSError, ValidationError, ValueError, RunError) as exc:
            log.warning("cannot read back run %s: %s", run_id, exc)
            raise RunStoreUnreadableError(f"the stored answers of run {run_id!r} cannot be read "
                                          f"({type(exc).__name__}: {exc})") from None

    def status(self, run_id: str) -> RunStatus:
        with self._lock:
            return self._get(run_id).status.model_copy()

    def list(self) -> list[RunStatus]:
        with self._lock:
            return [r.status.model_copy() for r in reversed(self._runs.values())]

    def traces(self, run_id: str, offset: int = 0, limit: int = 100, config: int | None = None) -> list[Trace]:
        """Finished traces, configuration by configuration, in question order (unanswered left out)."""
        _, _, records = self._contents(run_id)
        chosen = records if config is None else records[config : config + 1]
        done = [r.trace for per_config in chosen for r in per_config if r is not None]
        return done[offset : offset + limit]

    def report(self, run_id: str) -> RunReport:
        status, questions, records = self._contents(run_id)
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
        """Answers not yet started are skipped at once: the run leaves the queue, and with nothing
        running it ends (stored, its memory dropped) before this returns; the ones running finish."""
        with self._lock:
            run = self._get(run_id)
            if run.status.finished_at is not None or run.cancel.is_set():
                return run.status.model_copy()
            run.cancel.set()
            self._queue = deque(r for r in self._queue if r is not run)
            s = run.status
            skipped = s.total - s.done - s.skipped - run.in_flight
            s.skipped += skipped
            final = self._final_if_last(run)
        if run.ticket is not None:
            run.ticket.release(skipped)
        if final is not None:
            self._complete(run, final)
        with self._lock:
            return run.status.model_copy()

    def requests(self, run_id: str) -> tuple[Sequence[ConfigInfo], Sequence[dict[str, Any]]]:
        """A run's configurations, resolved and as requested (to rebuild them for :meth:`resume`)."""
        with self._lock:
            run = self._get(run_id)
            return tuple(run.status.configs), tuple(run.requests)

    def resume(self, run_id: str, configs: Sequence[PreparedConfig], ticket: Ticket | None = None) -> RunStatus:
        """Answer what an interrupted or cancelled run has not answered, with ``configs`` rebuilt
        from its stored requests; its logs are recovered first (a line cut by the crash is dropped).
        ``ticket`` holds the admission of what is left (the rest of it is given back here)."""
        with self._lock:
            run = self._get(run_id)
            previous = run.status.model_copy()
            if previous.state not in RESUMABLE:
                raise RunNotResumableError(f"run {run_id!r} is {previous.state}; only an interrupted or cancelled run resumes")
            if len(configs) != len(previous.configs):
                raise ValueError(f"run {run_id!r} has {len(previous.configs)} configurations, not {len(configs)}")
            run.status.state = "queued"  # claimed: a second resume is refused from here on
            stored = run.stored
        try:
            questions, records = run.questions, run.records
            if stored:
                questions = PackedQuestions(
                    _Persisted.model_validate_json(self._status_path(run_id).read_text(encoding="utf-8")).questions)
            if self._store is not None:
                records = []
                for c in range(len(configs)):
                    _, by_qid = open_results(self._run_dir(run_id, c))
                    records.append([by_qid.get(q.qid) for q in questions])
        except Exception:
            with self._lock:
                run.status.state = previous.state
            raise
        done = [r for per_config in records for r in per_config if r is not None]
        with self._lock:
            run.questions, run.records, run.stored = questions, records, False
            if self._read_back is not None and self._read_back[0] == run_id:
                self._read_back = None
            run.cancel = threading.Event()
            run.store_error = None
            run.in_flight = 0
            run.status = previous.model_copy(update={
                "state": "queued", "done": len(done), "errors": sum(r.error is not None for r in done), "skipped": 0,
                "finished_at": None, "error": None, "resumed": previous.resumed + 1})
            status = run.status.model_copy()
        run.ticket = ticket
        if ticket is not None:
            ticket.release(ticket.held - (status.total - len(done)))  # admitted for more than was left
        if self._store is not None:
            self._write_status(run, status)  # stored as running again: a crash now leaves it interrupted
        if len(done) == status.total:  # nothing was left: it ends at once
            self._complete(run, status.model_copy(update={"state": "done", "finished_at": time.time()}))
            with self._lock:
                return run.status.model_copy()
        self._schedule(run, configs)
        return status

    def shutdown(self) -> None:
        """Cancel the runs in flight (stored as cancelled once their running answers finish) and stop the workers."""
        with self._lock:
            ids = [rid for rid, run in self._runs.items() if run.status.finished_at is None]
        for run_id in ids:
            try:
                self.cancel(run_id)
            except UnknownRunError:
                pass
        self._pool.shutdown(wait=True, cancel_futures=False)
