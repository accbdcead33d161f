"""A run's questions packed into one block of JSON: what a queued background run holds.

5,000 ``Question`` objects are tens of thousands of small Python objects (~5 MB); freed, they
leave CPython's small-object arenas fragmented, so the process's RSS does not come back when a
queued run is cancelled. Packed, they are two allocations (the JSON and the offsets), returned to
the system when the run ends; one question is decoded when a worker takes it."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import json
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import overload

from routerag.corpus.schema import Question


class PackedQuestions(Sequence[Question]):
    """An immutable sequence of questions stored as their JSON, one after another."""

    __slots__ = ("_blob", "_ends")

    def __init__(self, questions: Iterable[Question] = ()) -> None:
        lines = [_encode(q) for q in questions]
        self._blob = b"".join(lines)
        self._ends = array("Q")
        end = 0
        for line in lines:
            end += len(line)
            self._ends.append(end)

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, index: int) -> Question: ...

    @overload
    def __getitem__(self, index: slice) -> list[Question]: ...

    def __getitem__(self, index: int | slice) -> Question | list[Question]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("question index out of range")
        raw = self._raw(index)
        try:
            return Question.model_validate_json(raw)
        except ValueError:  # text that is not valid Unicode (see _encode)
            return Question.model_validate(json.loads(raw.decode("utf-8", "surrogatepass")))

    def __iter__(self) -> Iterator[Question]:
        for i in range(len(self)):
            yield self[i]

    def _raw(self, index: int) -> bytes:
        start = self._ends[index - 1] if index else 0
        return self._blob[start : self._ends[index]]

    def json_array(self) -> bytes:
        """The questions as a JSON array (the ``questions`` of a stored run), without decoding them
        (not valid UTF-8 when a question holds a lone surrogate: such a run cannot be stored)."""
        return b"[" + b",".join(self._raw(i) for i in range(len(self))) + b"]"


def _encode(question: Question) -> bytes:
    try:
        return question.model_dump_json().encode("utf-8")
    except ValueError:  # a lone surrogate (it cannot arrive over HTTP): kept as it is, the run ends "failed"
        return json.dumps(question.model_dump(mode="json"), ensure_ascii=False).encode("utf-8", "surrogatepass")


def give_back_freed_memory() -> None:
    """Ask the C allocator to return freed heap pages to the system (glibc's ``malloc_trim``; a
    no-op elsewhere). Called when a run ends: its packed questions and answers were allocated in
    worker threads' heaps, which glibc otherwise keeps (docs/experiments/2026-11-29-service-under-load.md)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None
