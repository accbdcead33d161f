"""A value built from a picklable configuration once per process (:class:`ProcessLocal`).

What a Ray actor of ``routerag eval --engine ray`` receives: the configuration, never the built
object (a llama.cpp model, an index), so that each actor builds its own on first use, once."""

from __future__ import annotations

import threading
from typing import Any, Generic, TypeVar

C = TypeVar("C")
T = TypeVar("T")


class ProcessLocal(Generic[C, T]):
    """Builds its value with :meth:`_build` on the first :meth:`value` call in a process (under a
    lock, so threads of one process share one build) and pickles as its configuration alone."""

    def __init__(self, config: C) -> None:
        self.config = config
        self._value: T | None = None
        self._lock = threading.Lock()

    def _build(self) -> T:
        raise NotImplementedError

    def value(self) -> T:
        with self._lock:
            if self._value is None:
                self._value = self._build()
            return self._value

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"])  # type: ignore[misc]  # the subclass's own set-up, from the configuration
