"""Progress of slow steps (joining the bundled model, building an index, loading a model,
answering a question), reported to whatever listener the caller installed.

Library code marks a step and, when it knows its size, advances it::

    with progress.step("joining qwen2.5-coder-0.5b", total=n_bytes, unit="bytes") as task:
        task.advance(len(chunk))

Without a listener (tests, the server, library callers) this costs nothing and shows nothing; the
CLI installs one that draws rich progress bars (:mod:`routerag.cli.progress`). The listener lives
in a context variable, so a step reported from another thread (a pool worker) is not shown.

A one-off line for the user (where a server listens, what it mounted) goes to an
:data:`Announce` callback the caller passes in (the CLI prints it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal, Protocol

Unit = Literal["", "bytes", "items"]

Announce = Callable[[str], None]
"""Told one line for the user: ``announce(f"listening on {url}")``."""


class Task(Protocol):
    def advance(self, amount: float = 1) -> None: ...

    def describe(self, description: str) -> None: ...


class Listener(Protocol):
    def start(self, description: str, total: float | None, unit: Unit, label: str) -> Task: ...

    def finish(self, task: Task, ok: bool) -> None: ...


class _Silent:
    def advance(self, amount: float = 1) -> None:
        pass

    def describe(self, description: str) -> None:
        pass


_SILENT = _Silent()
_listener: ContextVar[Listener | None] = ContextVar("routerag_progress_listener", default=None)


@contextmanager
def step(description: str, *, total: float | None = None, unit: Unit = "", label: str = "items") -> Iterator[Task]:
    """A slow step: shown from start to end (with a bar when ``total`` is known) by the
    installed listener, if any. ``label`` names the counted things (``passages``)."""
    listener = _listener.get()
    if listener is None:
        yield _SILENT
        return
    task = listener.start(description, total, unit, label)
    try:
        yield task
    except BaseException:
        listener.finish(task, ok=False)
        raise
    listener.finish(task, ok=True)


@contextmanager
def reporting(listener: Listener) -> Iterator[Listener]:
    """Install ``listener`` for the block (the CLI's rich progress)."""
    token = _listener.set(listener)
    try:
        yield listener
    finally:
        _listener.reset(token)
