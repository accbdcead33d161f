"""Background runs: one or more strategy configurations answering the same questions in worker
threads, which clients can poll, page through, compare and cancel.

A run with one configuration is a plain batch; with two or more it is a *comparison*: every
configuration answers every question (interleaved, so all progress together), each answer is
scored with :func:`routerag.eval.runner.evaluate_question` and each configuration is summarised
with :func:`routerag.eval.summary.summarize` — the same code as ``routerag eval``. The report
lists per-question disagreements (different normalised answers or different EM).

:class:`RunManager` is two parts over one lock:

* the **run queue** (:mod:`routerag.server.run_queue`): the worker threads and cancellation. It
  holds runs, not answers (a worker takes the next answer of the oldest run when it is free), so
  cancelling a queued run skips its answers at once;
* the **run store** (:mod:`routerag.server.run_store`, its folder :mod:`routerag.server.run_files`):
  every run by id, the ``keep`` most recent finished ones, in memory and, with a ``store_dir``, on
  disk: ``<run_id>.json`` holds its status, questions and the configurations as requested, and
  ``<run_id>/<n>/`` each configuration's answers in the run format of ``routerag eval``, so
  ``routerag report`` reads a service run as it reads an evaluation.

Each answer is appended (fsynced) to ``results.jsonl`` when it finishes, before it is counted, so a
service killed mid-run (``kill -9``, an OOM kill) loses no finished answer: on the next start the
run is listed as ``interrupted`` with them, and :meth:`RunManager.resume` answers the rest (the log
is recovered as ``routerag eval`` recovers it; no question is answered twice). On a full disk
(:mod:`routerag.server.run_space`) a new run is refused below ``min_free_bytes`` free or when its
files cannot be written, and a run whose answer cannot be appended stops there: it ends ``failed``
with the reason, its saved answers kept and ``done`` counting only those. A clean shutdown
(SIGTERM) cancels the runs in flight and stores them as ``cancelled``. Folders on disk follow the
same bound as memory: the ``keep`` most recent finished or interrupted runs.

Memory: a run holds its questions packed (:class:`routerag.server.packed.PackedQuestions`). With a
``store_dir``, a run that has ended keeps only its status in memory: its questions and answers are
read back from its files when asked for.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from routerag.corpus.schema import Question
from routerag.edge.admission import Ticket
from routerag.server.packed import PackedQuestions
from routerag.server.run_files import RunFiles
from routerag.server.run_queue import RunQueue
from routerag.server.run_records import (
    RESUMABLE,
    ConfigInfo,
    PreparedConfig,
    RunEntry,
    RunNotResumableError,
    RunQuestion,
    RunReport,
    RunState,
    RunStatus,
    UnknownRunError,
    to_question,
)
from routerag.server.run_report import finished_traces, run_report
from routerag.server.run_store import RunStore
from routerag.trace import Trace

__all__ = ["RESUMABLE", "ConfigInfo", "PreparedConfig", "RunManager", "RunNotResumableError", "RunQuestion", "RunReport",
           "RunState", "RunStatus", "UnknownRunError", "to_question"]


class RunManager:
    """The service's background runs: a :class:`RunQueue` over a :class:`RunStore`."""

    def __init__(self, workers: int = 1, keep: int = 100, store_dir: Path | None = None,
                 min_free_bytes: int = 0) -> None:
        lock = threading.Lock()
        self.store = RunStore(lock, keep, RunFiles(store_dir, min_free_bytes) if store_dir is not None else None)
        self.queue = RunQueue(self.store, lock, workers)

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
        first = configs[0].info
        status = RunStatus(run_id=uuid.uuid4().hex[:16], strategy=first.strategy, params=first.params,
                           configs=[c.info for c in configs], dataset=dataset, n_questions=len(questions),
                           state="queued", total=len(questions) * len(configs), done=0, errors=0, skipped=0,
                           created_at=time.time())
        run = RunEntry(status=status, questions=PackedQuestions(questions), records=[[None] * len(questions) for _ in configs],
                       requests=[c.request for c in configs], ticket=ticket)
        self.store.add(run)
        self.queue.schedule(run, configs)
        return status.model_copy()

    def status(self, run_id: str) -> RunStatus:
        return self.store.status(run_id)

    def traces(self, run_id: str, offset: int = 0, limit: int = 100, config: int | None = None) -> list[Trace]:
        """Finished traces, configuration by configuration, in question order (unanswered left out)."""
        _, _, records = self.store.contents(run_id)
        return finished_traces(records, offset, limit, config)

    def report(self, run_id: str) -> RunReport:
        return run_report(*self.store.contents(run_id))

    def cancel(self, run_id: str) -> RunStatus:
        return self.queue.cancel(run_id)

    def requests(self, run_id: str) -> tuple[Sequence[ConfigInfo], Sequence[dict[str, Any]]]:
        """A run's configurations, resolved and as requested (to rebuild them for :meth:`resume`)."""
        return self.store.requests(run_id)

    def resume(self, run_id: str, configs: Sequence[PreparedConfig], ticket: Ticket | None = None) -> RunStatus:
        """Answer what an interrupted or cancelled run has not answered, with ``configs`` rebuilt
        from its stored requests; its logs are recovered first (a line cut by the crash is dropped).
        ``ticket`` holds the admission of what is left (the rest of it is given back here)."""
        run, status = self.store.reopen(run_id, len(configs))
        run.ticket = ticket
        if ticket is not None:
            ticket.release(ticket.held - (status.total - status.done))  # admitted for more than was left
        if status.done == status.total:  # nothing was left: it ends at once
            self.store.complete(run, status.model_copy(update={"state": "done", "finished_at": time.time()}))
            return self.store.snapshot(run)
        self.queue.schedule(run, configs)
        return status

    def shutdown(self) -> None:
        """Cancel the runs in flight (stored as cancelled once their running answers finish) and stop the workers."""
        self.queue.shutdown()

    def list(self) -> list[RunStatus]:  # last: the name would hide the builtin in the annotations below it
        """Every run's status, newest first."""
        return self.store.statuses()
