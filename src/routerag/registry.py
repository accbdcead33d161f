"""One generic registry for pluggable parts (sources, strategies, rewards, backends).

Built-ins are registered lazily as ``"module.path:attribute"`` strings so that heavy
dependencies (torch, faiss, llama.cpp, TRL) are imported only when a part is used.
Plugins call :meth:`Registry.register` with the object itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar, cast, overload

from routerag.errors import RouteragError

T = TypeVar("T")
F = TypeVar("F")  # what the decorator form registers and returns unchanged


class UnknownNameError(RouteragError, KeyError):
    """Raised for a name that is not registered; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


class Registry(Generic[T]):
    """A name -> object map with lazy ``"module:attr"`` entries."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T | str] = {}

    @overload
    def register(self, name: str, obj: None = None, *, replace: bool = False) -> Callable[[F], F]: ...

    @overload
    def register(self, name: str, obj: T | str, *, replace: bool = False) -> T | str: ...

    def register(self, name: str, obj: T | str | None = None, *, replace: bool = False) -> Callable[[F], F] | T | str:
        """Register ``obj`` under ``name``; usable as a decorator when ``obj`` is omitted."""

        def _add(target: F) -> F:
            if name in self._entries and not replace:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._entries[name] = cast("T | str", target)
            return target

        if obj is None:
            return _add
        _add(obj)
        return obj

    def get(self, name: str) -> T:
        try:
            entry = self._entries[name]
        except KeyError:
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}; valid: {', '.join(sorted(self._entries))}"
            ) from None
        if isinstance(entry, str):
            module_name, _, attr = entry.partition(":")
            entry = getattr(importlib.import_module(module_name), attr)
            self._entries[name] = entry
        return cast(T, entry)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

