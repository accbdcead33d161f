"""The run queue (:mod:`routerag.server.jobs`): worker threads answering the runs' answers, and
cancellation.

The queue holds runs, not answers: a worker takes the next answer of the oldest run when it is
free, so cancelling a queued run skips its answers at once and leaves nothing behind. In a
comparison every configuration answers every question, interleaved, so all progress together.
Each answer is saved by the run store before it is counted; one that cannot be saved stops the
run (the answers not taken yet are skipped), which then ends ``failed`` with what it saved."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from routerag.corpus.schema import Question
from routerag.eval.metrics import DEFAULT_METRICS
from routerag.eval.runner import evaluate_question, failed_trace, record_question
from routerag.eval.runs import QuestionRecord
from routerag.server.run_records import PreparedConfig, RunEntry, RunStatus, UnknownRunError
from routerag.server.run_store import RunStore

__all__ = ["RunQueue"]


def answer_one(config: PreparedConfig, question: Question, position: int) -> QuestionRecord:
    """One answer of a run, scored; a strategy that raises gives a failed trace (the run goes on)."""
    try:
        strategy = config.make()
        return evaluate_question(strategy, question, position, strategy_name=config.info.strategy,
                                 metrics=DEFAULT_METRICS)
    except Exception as exc:  # noqa: BLE001 — this answer failed; the run goes on and ends
        return record_question(failed_trace(question, config.info.strategy, exc), question, position,
                               metrics=DEFAULT_METRICS)


def final_if_last(run: RunEntry) -> RunStatus | None:
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


class RunQueue:
    """``workers`` threads over the runs of ``store``; ``lock`` is the store's."""

    def __init__(self, store: RunStore, lock: threading.Lock, workers: int = 1) -> None:
        self._store = store
        self._lock = lock
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="routerag-run")
        self._workers = workers
        self._drainers = 0  # workers taking answers from the queue now
        self._queue: deque[RunEntry] = deque()  # runs with answers not yet taken, oldest first

    def schedule(self, run: RunEntry, configs: Sequence[PreparedConfig]) -> None:
        """Queue the run for every answer it does not have yet (all of them for a new run)."""
        with self._lock:
            run.configs, run.next_answer = tuple(configs), 0
            self._queue.append(run)
            while self._drainers < self._workers:
                self._drainers += 1
                self._pool.submit(self._drain)

    def cancel(self, run_id: str) -> RunStatus:
        """Answers not yet started are skipped at once: the run leaves the queue, and with nothing
        running it ends (stored, its memory dropped) before this returns; the ones running finish."""
        with self._lock:
            run = self._store.get(run_id)
            if run.status.finished_at is not None or run.cancel.is_set():
                return run.status.model_copy()
            run.cancel.set()
            skipped = self._skip_the_rest(run)
            final = final_if_last(run)
        if run.ticket is not None:
            run.ticket.release(skipped)
        if final is not None:
            self._store.complete(run, final)
        return self._store.snapshot(run)

    def shutdown(self) -> None:
        """Cancel the runs in flight (stored as cancelled once their running answers finish) and stop the workers."""
        for run_id in self._store.unfinished():
            try:
                self.cancel(run_id)
            except UnknownRunError:
                pass
        self._pool.shutdown(wait=True, cancel_futures=False)

    # ------------------------------------------------------------------ the workers
    def _take(self) -> tuple[RunEntry, int, int] | None:
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
            while True:
                with self._lock:
                    taken = self._take()
                    if taken is None:  # counted out under the same lock as the look: schedule sees it
                        self._drainers -= 1
                        return
                run, c, position = taken
                self._finish_one(run, c, position, answer_one(run.configs[c], run.questions[position], position))
        except BaseException:  # something unforeseen: a later run still gets a worker
            with self._lock:
                self._drainers -= 1
            raise

    def _finish_one(self, run: RunEntry, c: int, position: int, record: QuestionRecord) -> None:
        saved = self._store.save_answer(run, c, record)
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
            final = final_if_last(run)
        if run.ticket is not None:
            run.ticket.release(released)
        if final is not None:
            self._store.complete(run, final)

    def _halt(self, run: RunEntry) -> int:
        """Stop a run whose store failed: the answers not taken yet are skipped (their number is
        returned); call with the lock held."""
        if run.halted:
            return 0
        run.halted = True
        run.cancel.set()
        return self._skip_the_rest(run)

    def _skip_the_rest(self, run: RunEntry) -> int:
        """Take the run out of the queue and count its answers not started as skipped (lock held)."""
        self._queue = deque(r for r in self._queue if r is not run)
        s = run.status
        skipped = s.total - s.done - s.skipped - run.in_flight
        s.skipped += skipped
        return skipped
