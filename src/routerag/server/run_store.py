"""The run store (:mod:`routerag.server.jobs`): every run by id, in memory and, with a folder
(:class:`~routerag.server.run_files.RunFiles`), on disk. It keeps the ``keep`` most recent
finished or interrupted runs (older ones are evicted from memory and disk), saves each answer
before it is counted, stores a run that has ended, reads a stored run back when it is asked for
and reopens one to resume. With a folder, a run that has ended keeps only its status in memory."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from routerag.corpus.schema import Question
from routerag.eval.runs import QuestionRecord
from routerag.server.packed import PackedQuestions, give_back_freed_memory
from routerag.server.run_files import Records, RunFiles
from routerag.server.run_records import RESUMABLE, ConfigInfo, RunEntry, RunNotResumableError, RunStatus, UnknownRunError
from routerag.server.run_space import store_failure

log = logging.getLogger(__name__)

__all__ = ["RunStore"]


class RunStore:
    """The runs; ``lock`` guards every run's changing fields (shared with the run queue)."""

    def __init__(self, lock: threading.Lock, keep: int = 100, files: RunFiles | None = None) -> None:
        self._lock = lock
        self._keep = keep
        self.files = files
        self._runs: OrderedDict[str, RunEntry] = OrderedDict()
        self._read_back: tuple[str, list[Question], Records] | None = None  # the last stored run read back
        if files is not None:
            for entry in files.load(keep):
                self._runs[entry.status.run_id] = entry

    def add(self, run: RunEntry) -> None:
        """A new run: its files opened first (:class:`RunStoreFullError` refuses it)."""
        if self.files is not None:
            self.files.open(run)
        with self._lock:
            self._runs[run.status.run_id] = run
            self._evict()

    def get(self, run_id: str) -> RunEntry:
        """The run (call with the lock held to read its changing fields)."""
        try:
            return self._runs[run_id]
        except KeyError:
            raise UnknownRunError(f"no run {run_id!r} (finished runs are kept, {self._keep} at most)") from None

    def status(self, run_id: str) -> RunStatus:
        with self._lock:
            return self.get(run_id).status.model_copy()

    def snapshot(self, run: RunEntry) -> RunStatus:
        with self._lock:
            return run.status.model_copy()

    def statuses(self) -> list[RunStatus]:
        with self._lock:
            return [r.status.model_copy() for r in reversed(self._runs.values())]

    def unfinished(self) -> list[str]:
        with self._lock:
            return [rid for rid, run in self._runs.items() if run.status.finished_at is None]

    def requests(self, run_id: str) -> tuple[Sequence[ConfigInfo], Sequence[dict[str, Any]]]:
        with self._lock:
            run = self.get(run_id)
            return tuple(run.status.configs), tuple(run.requests)

    def contents(self, run_id: str) -> tuple[RunStatus, Sequence[Question], Records]:
        """A run's status, questions and answers: from memory while it runs, else read back from its
        files (the last one read is kept, so paging through its traces reads it once)."""
        with self._lock:
            run = self.get(run_id)
            status = run.status.model_copy()
            if not run.stored:
                return status, run.questions, [list(per) for per in run.records]  # packed questions never change
            cached = self._read_back
            if cached is not None and cached[0] == run_id:
                return status, cached[1], cached[2]
        assert self.files is not None  # only a store with files holds runs stored
        saved, records = self.files.read_back(run_id)
        with self._lock:
            if self._runs.get(run_id) is run and run.stored:
                self._read_back = (run_id, saved.questions, records)
        return status, saved.questions, records

    # ------------------------------------------------------------------ answers and ends
    def save_answer(self, run: RunEntry, config: int, record: QuestionRecord) -> bool:
        """Append a finished answer to its log (before it is counted: what a client sees done is on
        disk); False when it is not saved: the store failed now or on an earlier answer."""
        if self.files is None or (run.store_error is not None and not run.halted):
            return True  # no store, or one that never took the run: the answers live in memory
        if run.halted:
            return False
        try:
            self.files.append(run, config, record)
            return True
        except Exception as exc:  # noqa: BLE001 — the run stops and ends "failed" with the reason
            log.exception("cannot append an answer of run %s", run.status.run_id)
            run.store_error = store_failure(exc)
            return False

    def complete(self, run: RunEntry, final: RunStatus) -> None:
        """Store a run that has ended, then publish its final status and drop what memory held for
        it (its questions and answers, read back from disk when asked for; a run without a store
        keeps them)."""
        # saved before it is published, so a client that sees it finished also finds it on disk
        if self.files is not None:
            final = self.files.save(run, final)
        if run.ticket is not None:
            run.ticket.release()
        with self._lock:
            run.status.state, run.status.finished_at, run.status.error = final.state, final.finished_at, final.error
            run.configs, run.ticket = (), None
            if self.files is not None:
                run.questions, run.records, run.stored = PackedQuestions(), [], True
            self._evict()
        give_back_freed_memory()

    def reopen(self, run_id: str, n_configs: int) -> tuple[RunEntry, RunStatus]:
        """Claim an interrupted or cancelled run to resume it: its questions and saved answers back in
        memory (its logs recovered first), its counts reset, stored as queued again."""
        with self._lock:
            run = self.get(run_id)
            previous = run.status.model_copy()
            if previous.state not in RESUMABLE:
                raise RunNotResumableError(f"run {run_id!r} is {previous.state}; only an interrupted or cancelled run resumes")
            if n_configs != len(previous.configs):
                raise ValueError(f"run {run_id!r} has {len(previous.configs)} configurations, not {n_configs}")
            run.status.state = "queued"  # claimed: a second resume is refused from here on
            stored = run.stored
        try:
            questions, records = run.questions, run.records
            if self.files is not None:
                if stored:
                    questions = self.files.questions(run_id)
                records = self.files.recover(run_id, n_configs, questions)
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
        if self.files is not None:
            self.files.write_status(run, status)  # stored as running again: a crash now leaves it interrupted
        return run, status

    def _evict(self) -> None:
        """Drop the oldest finished runs beyond ``keep`` (call with the lock held)."""
        finished = [rid for rid, r in self._runs.items() if r.status.finished_at is not None]
        for rid in finished[: max(0, len(finished) - self._keep)]:
            del self._runs[rid]
            if self._read_back is not None and self._read_back[0] == rid:
                self._read_back = None
            if self.files is not None:
                self.files.remove(rid)

