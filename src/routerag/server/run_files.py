"""The run store's folder on disk (:mod:`routerag.server.jobs`): ``<run_id>.json`` holds a run's
status, questions and configurations as requested (a :class:`StoredRun`), and ``<run_id>/<n>/``
each configuration's answers in the run format of ``routerag eval`` (``run.json``,
``results.jsonl``, ``summary.json``; :mod:`routerag.eval.runs`). A new run's files are opened
before its first answer, each answer is appended (fsynced) as it finishes, and a run that has
ended is saved whole; this module knows nothing of which runs are in memory."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from routerag.config import atomic_write_text
from routerag.corpus.schema import Question
from routerag.eval.runner import open_results
from routerag.eval.runs import QuestionRecord, RunDir, RunError
from routerag.eval.summary import summarize
from routerag.server.packed import PackedQuestions
from routerag.server.run_records import RunEntry, RunStatus, run_header
from routerag.server.run_space import RunStoreFullError, RunStoreUnreadableError, check_free_space, store_failure

log = logging.getLogger(__name__)

__all__ = ["RunFiles", "StoredRun"]

_RUN_ID = "0123456789abcdef"
_REQUESTS: TypeAdapter[list[dict[str, Any]]] = TypeAdapter(list[dict[str, Any]])

Records = list[list[QuestionRecord | None]]  # [config][question]


class StoredRun(BaseModel):
    """``<run_id>.json``: the status and the questions; the answers are in the run directories."""

    status: RunStatus
    questions: list[Question]
    requests: list[dict[str, Any]] = Field(default_factory=list)  # the configurations as requested (for resume)
    records: Records | None = None  # only in files stored before the run directories


def _is_run_id(name: str) -> bool:
    return len(name) == 16 and not set(name) - set(_RUN_ID)


class RunFiles:
    """The runs stored in ``directory``; a new run is refused below ``min_free_bytes`` free."""

    def __init__(self, directory: Path, min_free_bytes: int = 0) -> None:
        self.directory = directory
        self.min_free = min_free_bytes
        directory.mkdir(parents=True, exist_ok=True)

    def status_path(self, run_id: str) -> Path:
        return self.directory / f"{run_id}.json"

    def run_dir(self, run_id: str, config: int) -> RunDir:
        return RunDir(self.directory / run_id / str(config))

    # ------------------------------------------------------------------ a run as it goes
    def open(self, run: RunEntry) -> None:
        """Open a new run's files, or refuse it (:class:`RunStoreFullError`) when the store has too
        little free space or cannot be written; other failures (text that cannot be written) let it
        run and end "failed" with the reason."""
        check_free_space(self.directory, self.min_free)
        try:
            self._open(run)  # before any answer: a crash from here on leaves an interrupted run
        except OSError as exc:
            self.remove(run.status.run_id)
            raise RunStoreFullError(f"the run cannot be stored: {store_failure(exc)}") from None
        except Exception as exc:  # noqa: BLE001 — the run still runs and ends, "failed" with the reason
            log.exception("cannot store run %s", run.status.run_id)
            run.store_error = f"{type(exc).__name__}: {exc}"

    def _open(self, run: RunEntry) -> None:
        """The status file (state ``queued``), then each configuration's run directory with its
        header, as ``routerag eval`` opens one; answers are appended to it as they finish."""
        status = run.status
        self.write_status(run, status)
        for c, info in enumerate(status.configs):
            run_dir = self.run_dir(status.run_id, c)
            run_dir.path.mkdir(parents=True, exist_ok=True)
            if not run_dir.exists():
                run_dir.write_header(run_header(status, info, run.questions))

    def append(self, run: RunEntry, config: int, record: QuestionRecord) -> None:
        with run.write_lock:
            self.run_dir(run.status.run_id, config).results.append(record)

    def write_status(self, run: RunEntry, status: RunStatus) -> None:
        """``<run_id>.json`` (a :class:`StoredRun`), written with the packed questions as they are."""
        requests = _REQUESTS.dump_json(run.requests).decode()
        questions = run.questions.json_array().decode("utf-8", "surrogatepass")  # not UTF-8: the write fails, the run ends "failed"
        text = f'{{"status":{status.model_dump_json()},"questions":{questions},"requests":{requests}}}'
        atomic_write_text(self.status_path(status.run_id), text)

    # ------------------------------------------------------------------ a run that has ended
    def save(self, run: RunEntry, status: RunStatus) -> RunStatus:
        """Saves a finished run and returns the status to publish: ``failed`` (and saved as such,
        without its answers) when the answers cannot be saved. Never raises: a run always ends."""
        # the last answer is in: nothing of this run changes any more, so no lock is needed
        if run.halted:
            self._save_halted(run, status)
            return status
        try:
            if run.store_error is not None:
                raise RunError(run.store_error)
            self._write_runs(run, status)
            self.write_status(run, status)
            return status
        except Exception as exc:  # noqa: BLE001 — the reason becomes the run's state
            log.exception("cannot save run %s", status.run_id)
            reason = f"the run's answers could not be saved ({type(exc).__name__}: {exc})"
            failed = status.model_copy(update={"state": "failed", "error": reason.encode("utf-8", "replace").decode()})
        run.questions, run.records = PackedQuestions(), [[] for _ in status.configs]  # what is kept is what is stored
        try:
            shutil.rmtree(self.directory / status.run_id, ignore_errors=True)
            atomic_write_text(self.status_path(status.run_id), StoredRun(status=failed, questions=[]).model_dump_json())
        except Exception:  # noqa: BLE001
            log.exception("cannot save failed run %s", status.run_id)
        return failed

    def _save_halted(self, run: RunEntry, status: RunStatus) -> None:
        """A run stopped by its store: its logs hold what was saved and stay as they are; the
        summaries and the failed status are written if the disk takes them (if not, the status
        file written when it was accepted stays, and the next start lists the run as interrupted)."""
        for c, (info, records) in enumerate(zip(status.configs, run.records)):
            header = run_header(status, info, run.questions)
            try:
                done = [r for r in records if r is not None]
                atomic_write_text(self.run_dir(status.run_id, c).summary_path, summarize(header, done).model_dump_json())
            except Exception:  # noqa: BLE001 — the log is what counts; the summary is recomputed on read
                log.warning("cannot write the summary of stopped run %s", status.run_id)
        try:
            self.write_status(run, status)
        except Exception:  # noqa: BLE001
            log.warning("cannot store the failed status of run %s", status.run_id)

    def _write_runs(self, run: RunEntry, status: RunStatus) -> None:
        """Each configuration's answers as a run directory of ``routerag eval``'s format."""
        for c, (info, records) in enumerate(zip(status.configs, run.records)):
            run_dir = self.run_dir(status.run_id, c)
            header = run_header(status, info, run.questions)
            done = [r for r in records if r is not None]
            run_dir.path.mkdir(parents=True, exist_ok=True)
            run_dir.results.rewrite(done)  # the appended log, in question order
            atomic_write_text(run_dir.summary_path, summarize(header, done).model_dump_json(indent=2))
            if not run_dir.exists():
                run_dir.write_header(header)

    def remove(self, run_id: str) -> None:
        self.status_path(run_id).unlink(missing_ok=True)  # first: a folder without it is removed on the next start
        shutil.rmtree(self.directory / run_id, ignore_errors=True)

    # ------------------------------------------------------------------ reading back
    def load(self, keep: int) -> list[RunEntry]:
        """The stored runs, oldest first: the ``keep`` most recent; older ones, and folders without
        a status file (a run whose removal was cut short), are removed from disk. Only each run's
        status is held: its questions and answers are read back when asked for."""
        files = [p for p in self.directory.glob("*.json") if _is_run_id(p.stem)]
        files.sort(key=lambda p: p.stat().st_mtime)
        old, files = files[: max(0, len(files) - keep)], files[-keep:]
        for path in old:
            self.remove(path.stem)
        stored = {p.stem for p in files}
        for folder in self.directory.iterdir():
            if folder.is_dir() and _is_run_id(folder.name) and folder.name not in stored:
                shutil.rmtree(folder, ignore_errors=True)
        entries = []
        for path in files:
            try:
                saved = StoredRun.model_validate_json(path.read_text(encoding="utf-8"))
                records = self._read_records(saved)
            except (ValidationError, OSError, ValueError, RunError) as exc:
                log.warning("skipping saved run %s: %s", path, exc)
                continue
            status = saved.status
            if status.finished_at is None:
                status = self._interrupted(saved, records)
                log.warning("run %s was interrupted with %d of %d answers; POST /v1/runs/%s/resume continues it",
                            status.run_id, status.done, status.total, status.run_id)
            entries.append(RunEntry(status=status, questions=PackedQuestions(), records=[], requests=saved.requests,
                                    stored=True))
        return entries

    def read_back(self, run_id: str) -> tuple[StoredRun, Records]:
        """A stored run's questions and answers, or :class:`RunStoreUnreadableError` saying why not."""
        try:
            saved = StoredRun.model_validate_json(self.status_path(run_id).read_text(encoding="utf-8"))
            return saved, self._read_records(saved)
        except (OSError, ValidationError, ValueError, RunError) as exc:
            log.warning("cannot read back run %s: %s", run_id, exc)
            raise RunStoreUnreadableError(f"the stored answers of run {run_id!r} cannot be read "
                                          f"({type(exc).__name__}: {exc})") from None

    def questions(self, run_id: str) -> PackedQuestions:
        saved = StoredRun.model_validate_json(self.status_path(run_id).read_text(encoding="utf-8"))
        return PackedQuestions(saved.questions)

    def recover(self, run_id: str, n_configs: int, questions: PackedQuestions) -> Records:
        """The answers a run has saved, its logs recovered as ``routerag eval`` recovers them (a
        line cut by a crash is dropped), for it to resume."""
        records: Records = []
        for c in range(n_configs):
            _, by_qid = open_results(self.run_dir(run_id, c))
            records.append([by_qid.get(q.qid) for q in questions])
        return records

    def _read_records(self, saved: StoredRun) -> Records:
        if saved.records is not None:
            return saved.records
        position = {q.qid: i for i, q in enumerate(saved.questions)}
        records: Records = []
        for c in range(len(saved.status.configs)):
            per_config: list[QuestionRecord | None] = [None] * len(saved.questions)
            run_dir = self.run_dir(saved.status.run_id, c)
            if run_dir.exists():
                for record in run_dir.read_records():  # a damaged tail is left for resume to cut
                    i = position.get(record.qid)
                    if i is not None and per_config[i] is None:
                        per_config[i] = record
            records.append(per_config)
        return records

    def _interrupted(self, saved: StoredRun, records: Records) -> RunStatus:
        """A run stored as queued or running: the process died under it. It ended when its files last changed."""
        done = [r for per_config in records for r in per_config if r is not None]
        run_id = saved.status.run_id
        paths = [self.status_path(run_id)] + [self.run_dir(run_id, c).results.path for c in range(len(records))]
        ended = max(p.stat().st_mtime for p in paths if p.exists())
        return saved.status.model_copy(update={"state": "interrupted", "done": len(done), "skipped": 0,
                                               "errors": sum(r.error is not None for r in done), "finished_at": ended})
