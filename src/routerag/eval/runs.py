"""The run directory: its typed files and the crash-safe results log.

::

    runs/NAME/
      run.json              RunHeader: dataset, strategy, sampled qids, fingerprint, versions
      config.resolved.yaml  the resolved evaluation configuration (CLI runs)
      results.jsonl         one QuestionRecord per line, appended + fsynced per question
        or results.jsonl.xz   the same log compressed, once the run is finished (``routerag runs compress``;
                              ``results.jsonl.gz``, the earlier form, is read the same way)
      summary.json          RunSummary, rewritten atomically at the end (and on interruption)

Appends are one ``write`` of a whole line followed by ``fsync``, so a crash can only leave a
*trailing* partial or corrupt line. :meth:`ResultsLog.recover` truncates such a tail back to the
last good line and says so; a bad line *followed by good ones* is not a crash artefact and is
refused rather than "repaired".

Compression: a running evaluation writes plain JSONL (an fsynced append per question; compressed
members would make a crash-cut tail unrecoverable). Every reader takes every form. A finished
log is compressed whole (:meth:`ResultsLog.compress`: written beside, verified, then the plain
file removed); resuming a compressed run first decompresses it (the same steps the other way),
then appends. A crash between the two steps leaves both files with the same records, which is
read as one log; two files that differ are refused.

The packed form is xz (LZMA, Python's standard library): a trace repeats the same retrieved
passages across steps and questions further apart than gzip's 32 KiB window, and LZMA's 64 MiB
dictionary finds them (a 100-question realroute log: 6.8 MB plain, 1.29 MB gzip -9, 0.62 MB xz).
Logs packed earlier as gzip (``results.jsonl.gz``) read as before; ``compress`` re-packs them.
"""

from __future__ import annotations

import gzip
import json
import lzma
import os
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel, Field, ValidationError

from routerag.config import atomic_write_bytes, atomic_write_text
from routerag.errors import RouteragError
from routerag.eval.cost import CostMetrics
from routerag.eval.routing import RoutingOutcome
from routerag.trace import Trace

HEADER_NAME = "run.json"
RESULTS_NAME = "results.jsonl"
PACKED_SUFFIX = ".xz"  # results.jsonl.xz: a finished log, compressed
LEGACY_PACKED_SUFFIX = ".gz"  # results.jsonl.gz: the earlier packed form, read (and re-packed by compress)
XZ_PRESET = 9  # a 64 MiB dictionary (~0.7 GB while compressing, ~65 MB to read back)
SUMMARY_NAME = "summary.json"
CONFIG_NAME = "config.resolved.yaml"
LOCK_NAME = ".lock"


class RunError(RouteragError, RuntimeError):
    """A run directory that cannot be used (corrupt log, other configuration, locked)."""


class Versions(BaseModel):
    routerag: str
    python: str
    platform: str
    packages: dict[str, str] = Field(default_factory=dict)
    model: str | None = None  # the chat model's identity
    index_manifest: str | None = None  # sha256 of the index bundle's manifest.json


class RunHeader(BaseModel):
    name: str
    dataset: str
    strategy: str
    label: str  # the row name in report tables (defaults to the strategy)
    metrics: list[str]
    sample_qids: list[str]
    fingerprint: str  # hash of everything that determines the answers; resume refuses a mismatch
    versions: Versions
    created_at: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))


class QuestionRecord(BaseModel):
    position: int  # index of the question in the run's sample
    qid: str
    question: str
    dataset: str = ""
    golds: list[str]
    answer_scheme: str | None = None  # how the golds were scored (None: as aliases; "wtq": one list's items)
    gold_source: str | None = None
    question_type: str | None = None  # the dataset's own type (HotpotQA ``type``), if it has one
    prediction: str
    metrics: dict[str, float | None]  # None: not computable (no gold, judge gave no verdict)
    cost: CostMetrics
    routing: RoutingOutcome | None = None
    error: str | None = None
    judge_raw: str | None = None
    trace: Trace


class RecoveryReport(BaseModel):
    records: int  # good records kept
    truncated_bytes: int = 0  # bytes cut from the end (0: the log was intact)
    dropped_preview: str = ""  # the start of what was cut, for the message

    @property
    def repaired(self) -> bool:
        return self.truncated_bytes > 0

    def message(self, path: Path) -> str:
        return (
            f"{path}: the last line was incomplete (a crash mid-write); cut {self.truncated_bytes} bytes "
            f"({self.dropped_preview!r}...), kept {self.records} complete records"
        )


R = TypeVar("R", bound=BaseModel)


class CompressReport(BaseModel):
    records: int
    plain_bytes: int
    packed_bytes: int
    already: bool = False  # the log was compressed before (in the current form)
    repacked: bool = False  # the log was compressed before in the earlier gzip form, now xz


class RecordLog(Generic[R]):
    """Append-only JSONL of ``record_type`` records, one fsynced line per record; read from the
    plain file or, once finished, its ``.xz`` (or the earlier ``.gz``; see the module docstring).
    :class:`ResultsLog` is an evaluation's; other resumable jobs (``routerag routing-report``) keep
    their own records the same crash-safe way."""

    def __init__(self, path: str | Path, record_type: type[R]) -> None:
        self.record_type = record_type
        self.path = Path(path)  # the plain log; appends always go here
        self.xz_path = self.path.with_name(self.path.name + PACKED_SUFFIX)
        self.gz_path = self.path.with_name(self.path.name + LEGACY_PACKED_SUFFIX)

    @property
    def packed_path(self) -> Path:
        """The compressed log: the xz file, else an earlier gzip one that exists, else where the
        xz file would go. Both packed forms at once are refused when read (:meth:`_unpacked`)."""
        if not self.xz_path.exists() and self.gz_path.exists():
            return self.gz_path
        return self.xz_path

    @property
    def location(self) -> Path:
        """The file that holds the log now (the compressed one when only it exists)."""
        return self.packed_path if self.packed_path.exists() and not self.path.exists() else self.path

    def _unpacked(self) -> bytes:
        if self.xz_path.exists() and self.gz_path.exists():
            raise RunError(
                f"{self.path.parent}: both {self.xz_path.name} and {self.gz_path.name} exist; nothing was changed. "
                "Keep one (`routerag runs compress` keeps the xz one after checking they hold the same records)."
            )
        return _decompress(self.packed_path)

    def _data(self) -> bytes:
        """The log's bytes, from whichever file holds it."""
        plain, packed = self.path.exists(), self.packed_path.exists()
        if not packed:
            return self.path.read_bytes() if plain else b""
        data = self._unpacked()
        if plain and self.path.read_bytes() != data:
            raise RunError(
                f"{self.path.parent}: both {self.path.name} and {self.packed_path.name} exist and hold different "
                "records; nothing was changed. Keep the right one and move the other away."
            )
        return data

    def _parse(self, line: bytes) -> R | None:
        try:
            return self.record_type.model_validate_json(line)
        except (ValidationError, ValueError):
            return None

    def _scan(self, data: bytes | None = None) -> tuple[list[R], int, int]:
        """(good records, byte offset after the last good line, size of the log); ``data``: the
        log's bytes when the caller has read them already."""
        data = self._data() if data is None else data
        records: list[R] = []
        good_end = 0
        bad_at: int | None = None
        offset = 0
        while offset < len(data):
            newline = data.find(b"\n", offset)
            end = len(data) if newline < 0 else newline + 1
            line = data[offset:end]
            record = self._parse(line) if newline >= 0 else None  # a line without "\n" was never finished
            if record is None and line.strip():
                if bad_at is None:
                    bad_at = offset
            elif record is not None:
                if bad_at is not None:
                    line_no = data.count(b"\n", 0, bad_at) + 1
                    raise RunError(
                        f"{self.location}: line {line_no} is corrupt but later lines are not; this is not a crash "
                        "artefact, so nothing was changed. Inspect the file or start a new run."
                    )
                records.append(record)
                good_end = end
            elif bad_at is None:  # a blank line between records: harmless
                good_end = end
            offset = end
        return records, good_end, len(data)

    def read(self) -> list[R]:
        """The good records; a damaged tail is ignored (not repaired: see :meth:`recover`)."""
        return self._scan()[0]

    def recover(self) -> RecoveryReport:
        """Truncate a partial/corrupt tail left by a crash; return what was kept and cut."""
        records, good_end, size = self._scan()
        if good_end == size:
            return RecoveryReport(records=len(records))
        self.unpack()  # a compressed log is written whole, but a bad tail is cut the same way
        with self.path.open("rb") as handle:
            handle.seek(good_end)
            preview = handle.read(60).decode("utf-8", errors="replace")
        with self.path.open("r+b") as handle:
            handle.truncate(good_end)
            handle.flush()
            os.fsync(handle.fileno())
        return RecoveryReport(records=len(records), truncated_bytes=size - good_end, dropped_preview=preview)

    def unpack(self) -> None:
        """Make the plain file the log again (before an append): write it from the compressed
        one, then remove that. Nothing to do for a plain log."""
        if not self.packed_path.exists():
            return
        data = self._data()  # checks that a plain file beside it, if any, holds the same
        if not self.path.exists():
            atomic_write_bytes(self.path, data)
        self.packed_path.unlink()

    def compress(self) -> CompressReport:
        """Replace a complete plain log by its xz (written beside, read back and compared, then
        the plain file removed); a log packed earlier as gzip is re-packed as xz the same way.
        Refuses a log with a damaged tail (resume or recover it first)."""
        if self.xz_path.exists() and self.gz_path.exists() and not self.path.exists():
            if _decompress(self.xz_path) != _decompress(self.gz_path):
                raise RunError(f"{self.path.parent}: {self.xz_path.name} and {self.gz_path.name} hold different records; "
                               "nothing was changed. Keep the right one and move the other away.")
            self.gz_path.unlink()  # a re-pack cut between its two steps: the xz copy was verified
        if self.packed_path.exists() and not self.path.exists():
            data = self._data()
            records = self._scan(data)[0]
            if self.packed_path == self.gz_path:  # the earlier form: re-pack as xz (verified), then drop the gzip
                self._write_packed(data)
                self.gz_path.unlink()
                return CompressReport(records=len(records), plain_bytes=len(data), packed_bytes=self.xz_path.stat().st_size,
                                      repacked=True)
            return CompressReport(records=len(records), plain_bytes=len(data), packed_bytes=self.packed_path.stat().st_size, already=True)
        if not self.path.exists():
            raise RunError(f"{self.path.parent}: no {self.path.name} to compress")
        data = self._data()  # checks that an earlier packed copy beside it, if any, holds the same
        records, good_end, size = self._scan(data)
        if good_end != size:
            raise RunError(f"{self.path}: the last line is incomplete (a crash mid-write); resume the run before compressing it")
        self.gz_path.unlink(missing_ok=True)  # _data() checked that an earlier gzip copy holds the same records
        packed = self._write_packed(data)
        self.path.unlink()
        return CompressReport(records=len(records), plain_bytes=len(data), packed_bytes=packed)

    def _write_packed(self, data: bytes) -> int:
        """Write ``data`` as the xz log, read it back and compare; the xz file's size."""
        packed = lzma.compress(data, format=lzma.FORMAT_XZ, preset=XZ_PRESET)  # deterministic: same log, same bytes
        atomic_write_bytes(self.xz_path, packed)
        if _decompress(self.xz_path) != data:
            self.xz_path.unlink()
            raise RunError(f"{self.xz_path}: the compressed copy does not read back; nothing else was changed")
        return len(packed)

    def append(self, record: R) -> None:
        data = (record.model_dump_json() + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.unpack()
        with self.path.open("ab") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())

    def rewrite(self, records: list[R]) -> None:
        """Atomically replace the log with ``records`` (used to drop errored records for a retry)."""
        atomic_write_text(self.path, "".join(r.model_dump_json() + "\n" for r in records))
        self.xz_path.unlink(missing_ok=True)
        self.gz_path.unlink(missing_ok=True)


class ResultsLog(RecordLog[QuestionRecord]):
    """An evaluation's log of :class:`QuestionRecord`, one per question: ``results.jsonl`` or, for a
    finished run, ``results.jsonl.xz``."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path, QuestionRecord)


def _decompress(path: Path) -> bytes:
    """The bytes of a packed log (xz, or gzip for the earlier form), by its suffix."""
    try:
        if path.suffix == LEGACY_PACKED_SUFFIX:
            return gzip.decompress(path.read_bytes())
        return lzma.decompress(path.read_bytes(), format=lzma.FORMAT_XZ)
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
        raise RunError(f"{path}: damaged compressed log ({exc}); nothing was changed") from None


class RunDir:
    """Paths and typed readers of one run directory."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @property
    def header_path(self) -> Path:
        return self.path / HEADER_NAME

    @property
    def results(self) -> ResultsLog:
        return ResultsLog(self.path / RESULTS_NAME)

    @property
    def summary_path(self) -> Path:
        return self.path / SUMMARY_NAME

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG_NAME

    def exists(self) -> bool:
        return self.header_path.is_file()

    def check_adoptable(self) -> None:
        """Refuse a folder that holds answers but no header: nothing shows which configuration
        made them, so resuming could mix two configurations in one run. Nothing is changed."""
        if self.exists():
            return
        records = self.results.read()
        if records:
            raise RunError(
                f"{self.path} holds {len(records)} answered questions in {self.results.path.name} but no {HEADER_NAME}, "
                "so nothing shows which configuration produced them; nothing was changed. To keep them, restore "
                f"{HEADER_NAME} (from a backup or git); to start a new run, choose another --out (or move "
                f"{self.results.path.name} out of the folder)."
            )

    def read_header(self) -> RunHeader:
        if not self.header_path.is_file():
            raise RunError(f"{self.path}: not a run directory (no {HEADER_NAME})")
        try:
            return RunHeader.model_validate_json(self.header_path.read_bytes())
        except ValidationError as exc:
            raise RunError(f"{self.header_path}: corrupt run header: {exc}") from None

    def write_header(self, header: RunHeader) -> None:
        atomic_write_text(self.header_path, header.model_dump_json(indent=2))

    def read_records(self) -> list[QuestionRecord]:
        return self.results.read()

    def read_summary_json(self) -> dict:
        if not self.summary_path.is_file():
            raise RunError(f"{self.path}: no {SUMMARY_NAME} (the run never finished a question?)")
        return json.loads(self.summary_path.read_text(encoding="utf-8"))

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive use of the directory by one process (two writers would duplicate records)."""
        import fcntl

        self.path.mkdir(parents=True, exist_ok=True)
        with (self.path / LOCK_NAME).open("a") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RunError(f"{self.path}: another process is running this evaluation") from None
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
