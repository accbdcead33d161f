"""The ask service's warm-up: what the first answer of its default strategy needs (the strategy
prepared, which may unpack its policy adapter; its model built, the llama.cpp weights loaded; the
indexes of the sources it names loaded by one search each) is loaded at startup, in a background
thread, so that ``/ready`` answering 200 means that strategy answers without loading.

:class:`WarmUp` runs a plan (:func:`strategy_plan`, or a test's) once in a daemon thread and
reports its :class:`WarmUpState`; the service's ``/ready`` is 503 while it is ``warming`` and
when it ``failed`` (the process keeps serving; ``/health`` and the other routes answer)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from routerag.errors import RouteragError

log = logging.getLogger(__name__)

__all__ = ["WarmUp", "WarmUpPart", "WarmUpSkipped", "WarmUpState"]

WarmUpPhase = Literal["off", "warming", "done", "skipped", "failed"]


class WarmUpSkipped(RouteragError):
    """The plan has nothing to warm: the default strategy cannot run on this service's defaults
    (a source it needs is not mounted, an optional dependency is missing)."""


@dataclass(frozen=True)
class WarmUpPart:
    """One thing the first answer needs, and how to load it (a callable whose result is kept nowhere)."""

    name: str
    load: Callable[[], object]


Plan = Callable[[], list[WarmUpPart]]


class WarmUpState(BaseModel):
    """Where the warm-up stands, as ``/ready`` reports it."""

    state: WarmUpPhase = Field(description="off (disabled), warming, done, skipped (nothing to warm) or failed")
    strategy: str | None = Field(None, description="the strategy warmed (the service's default)")
    warming: list[str] = Field(default_factory=list, description="the parts still loading")
    warmed: list[str] = Field(default_factory=list, description="the parts loaded")
    error: str | None = Field(None, description="why it failed or was skipped")
    seconds: float | None = Field(None, description="how long it took, once finished")

    def blocks_readiness(self) -> str | None:
        """The ``/ready`` reason this state gives (None: it does not hold readiness back)."""
        if self.state == "warming":
            return f"warming {self.strategy}: {', '.join(self.warming)}"
        if self.state == "failed":
            return f"warm-up of {self.strategy} failed: {self.error}"
        return None


class WarmUp:
    """Runs ``plan`` once in a daemon thread (:meth:`start`); ``plan=None``: the warm-up is off.
    Thread-safe: :meth:`state` may be read from the event loop at any time."""

    def __init__(self, strategy: str, plan: Plan | None) -> None:
        self._plan = plan
        self._lock = threading.Lock()
        self._state = WarmUpState(state="off" if plan is None else "warming", strategy=strategy,
                                  warming=[] if plan is None else [f"strategy {strategy}"])
        self._thread: threading.Thread | None = None

    def state(self) -> WarmUpState:
        with self._lock:
            return self._state.model_copy(deep=True)

    def start(self) -> None:
        if self._plan is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, args=(self._plan,), name="routerag-warm-up", daemon=True)
        self._thread.start()

    def join(self, timeout_s: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _update(self, **changes: object) -> None:
        with self._lock:
            self._state = self._state.model_copy(update=changes)

    def _run(self, plan: Plan) -> None:
        started = time.monotonic()
        try:
            parts = plan()
            self._update(warming=[part.name for part in parts])
            for part in parts:
                part.load()
                with self._lock:
                    warming = [name for name in self._state.warming if name != part.name]
                    self._state = self._state.model_copy(update={"warming": warming,
                                                                 "warmed": [*self._state.warmed, part.name]})
        except WarmUpSkipped as exc:
            log.info("warm-up skipped: %s", exc)
            self._update(state="skipped", warming=[], error=str(exc), seconds=time.monotonic() - started)
            return
        except Exception as exc:  # noqa: BLE001 — a failed warm-up is reported by /ready, never fatal
            log.exception("the warm-up failed")
            where = self.state().warming
            error = f"{where[0]}: " if where else ""
            self._update(state="failed", error=f"{error}{type(exc).__name__}: {exc}", seconds=time.monotonic() - started)
            return
        seconds = time.monotonic() - started
        log.info("warm-up of %s done in %.1f s", self._state.strategy, seconds)
        self._update(state="done", seconds=seconds)
