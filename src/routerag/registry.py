"""One generic registry for pluggable parts (sources, strategies, rewards, backends, routers ...).

Built-ins are registered lazily as ``"module.path:attribute"`` strings so that heavy
dependencies (torch, faiss, llama.cpp, TRL) are imported only when a part is used.
Plugins either call :meth:`Registry.register` with the object itself, or are named in a
configuration as ``"pkg.mod:Attr"`` — a *plugin name*, imported on lookup, no registration
and no edit of routerag needed.

Every registry declares what it holds (a :class:`Kind`: a class with a ``Params`` model, a
function called with ``RouterDeps``, an instance of ``RewardSpec`` ...), and every entry is checked
against it before it is handed out, so a wrong kind is a clear error, never a call of whatever a
name imported.

A configuration field that names a registered part is typed ``Annotated[str, RegisteredName(REG)]``
(not a ``Literal`` of the built-ins): it accepts every registered name and every plugin name that
imports, so a part registered by a plugin is accepted without editing core code. Values from a
request (:class:`~routerag.provenance.FromRequest`) name registered parts and the plugins the
operator allowed only: any other plugin name is refused before anything is imported.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast, overload

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from routerag.errors import RouteragError
from routerag.provenance import FromRequest, from_request

T = TypeVar("T")
F = TypeVar("F")  # what the decorator form registers and returns unchanged

_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
PLUGIN_NAME = re.compile(rf"^({_DOTTED}):({_DOTTED})$")
"""``pkg.mod:Attr`` (``Attr`` may be dotted: ``pkg.mod:Class.factory``)."""


class UnknownNameError(RouteragError, KeyError):
    """Raised for a name that is not registered; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


class PluginError(UnknownNameError):
    """A plugin name (``"pkg.mod:Attr"``) that does not import, lacks the attribute, or names an
    object of the wrong kind; the message says which."""


class RefusedPluginError(UnknownNameError):
    """A plugin name sent by a request that the operator did not allow; nothing was imported."""


class WrongKindError(RouteragError, TypeError):
    """An object registered (or a built-in imported) that is not what its registry holds."""


def is_plugin_name(name: str) -> bool:
    return PLUGIN_NAME.match(name) is not None


@dataclass(frozen=True)
class Kind:
    """What a registry holds: ``test(obj)`` tells whether ``obj`` is one, ``what`` says it in errors."""

    what: str
    test: Callable[[object], bool]


def instances_of(cls: type, what: str | None = None) -> Kind:
    return Kind(what or f"a {cls.__name__}", lambda obj: isinstance(obj, cls))


def classes_with(*attributes: str) -> Kind:
    """Classes that have ``attributes`` (a strategy: ``Params`` and ``run``)."""
    what = "a class" + (f" with {' and '.join(attributes)}" if attributes else "")
    return Kind(what, lambda obj: isinstance(obj, type) and all(hasattr(obj, name) for name in attributes))


def callables_taking(*arguments: str) -> Kind:
    """Functions, methods and classes written in Python (not a builtin such as ``print`` or
    ``sys.exit``) whose signature takes ``arguments`` positionally: a factory, a metric, a selector."""
    return Kind(f"a function or class called with ({', '.join(arguments)})",
                functools.partial(_takes_positionally, count=len(arguments)))


def _takes_positionally(obj: object, count: int) -> bool:
    if not (inspect.isfunction(obj) or inspect.ismethod(obj) or inspect.isclass(obj)
            or isinstance(obj, functools.partial)):
        return False
    try:
        inspect.signature(obj).bind(*range(count))
    except (TypeError, ValueError):  # arguments it does not take; no signature
        return False
    return True


class Registry(Generic[T]):
    """A name -> object map with lazy ``"module:attr"`` entries and ``"pkg.mod:Attr"`` plugin names.

    ``holds`` is what every entry must be: an object registered is checked when it is registered
    (:class:`WrongKindError`), a lazy built-in when it is first imported, a plugin's object when
    its name is looked up (:class:`PluginError`), before any of them is handed out."""

    def __init__(self, kind: str, holds: Kind) -> None:
        self.kind = kind
        self.holds = holds
        self._entries: dict[str, T | str] = {}
        self._plugins: dict[str, T] = {}

    @overload
    def register(self, name: str, obj: None = None, *, replace: bool = False) -> Callable[[F], F]: ...

    @overload
    def register(self, name: str, obj: T | str, *, replace: bool = False) -> T | str: ...

    def register(self, name: str, obj: T | str | None = None, *, replace: bool = False) -> Callable[[F], F] | T | str:
        """Register ``obj`` under ``name``; usable as a decorator when ``obj`` is omitted."""

        def _add(target: F) -> F:
            if name in self._entries and not replace:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            if not isinstance(target, str):
                self._check_kind(name, target)
            self._entries[name] = cast("T | str", target)
            return target

        if obj is None:
            return _add
        _add(obj)
        return obj

    def get(self, name: str, request: FromRequest | None = None) -> T:
        """The object registered as ``name`` (imported on first use), or the plugin ``name`` names.
        With ``request`` (the name comes from one), a plugin name the operator did not allow is
        refused before anything is imported (:class:`RefusedPluginError`)."""
        if name not in self._entries:
            if is_plugin_name(name):
                self._admit(name, request)
                return self._plugin(name)
            raise self._unknown(name, request)
        entry = self._entries[name]
        if isinstance(entry, str):
            imported = _import(entry)
            self._check_kind(name, imported, f" ({entry})", entry)
            entry = cast(T, imported)
            self._entries[name] = entry
        return cast(T, entry)

    def validate_name(self, name: str, request: FromRequest | None = None) -> str:
        """``name`` when it is registered (nothing is imported) or a plugin name that loads (the
        plugin is imported and checked) and, with ``request``, that the operator allowed; else
        :class:`UnknownNameError` / :class:`PluginError` / :class:`RefusedPluginError`."""
        if name not in self._entries:
            self.get(name, request)
        return name

    def names(self) -> list[str]:
        """The registered names (plugin names looked up so far are not listed)."""
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def _holds(self, obj: object, path: str = "") -> bool:
        """Whether ``obj`` (imported from ``path``, when it was) is what this registry holds. Python's
        builtins (``print``, ``exit``, ``open`` ...) are never one, whatever has replaced them there (a
        progress bar may swap ``print`` for a Python function)."""
        return path.partition(":")[0] != "builtins" and self.holds.test(obj)

    def _check_kind(self, name: str, obj: object, lazy: str = "", path: str = "") -> None:
        if not self._holds(obj, path):
            raise WrongKindError(f"{self.kind} {name!r}{lazy}: {obj!r} is not {self.holds.what}")

    def _admit(self, name: str, request: FromRequest | None) -> None:
        if request is not None and not request.allows_plugin(name):
            allowed = f" or an allowed plugin ({', '.join(sorted(request.plugins))})" if request.plugins else ""
            raise RefusedPluginError(
                f"{self.kind} {name!r}: a request names a registered {self.kind} ({', '.join(self.names())}){allowed}; "
                "other plugins ('package.module:attribute') are named by the operator: in the configuration (a YAML "
                "file, --set) or in the server's security.allowed_plugins")

    def _valid(self, request: FromRequest | None) -> list[str]:
        allowed = sorted(request.plugins) if request is not None else []
        return [*sorted(self._entries), *allowed]

    def _unknown(self, name: str, request: FromRequest | None) -> UnknownNameError:
        plugins = "" if request is not None else ", or a plugin as 'pkg.module:Attribute'"
        return UnknownNameError(f"unknown {self.kind} {name!r}; valid: {', '.join(self._valid(request))}{plugins}")

    def _plugin(self, name: str) -> T:
        if name in self._plugins:
            return self._plugins[name]
        module_name, _, attr = name.partition(":")
        try:
            obj = _import(name)
        except ModuleNotFoundError as exc:
            raise PluginError(f"{self.kind} plugin {name!r}: cannot import module {module_name!r} ({exc})") from None
        except ImportError as exc:
            raise PluginError(f"{self.kind} plugin {name!r}: importing {module_name!r} failed ({exc})") from None
        except AttributeError:
            raise PluginError(f"{self.kind} plugin {name!r}: module {module_name!r} has no attribute {attr!r}") from None
        if not self._holds(obj, name):
            raise PluginError(f"{self.kind} plugin {name!r}: {obj!r} is not a {self.kind} ({self.holds.what})")
        self._plugins[name] = cast(T, obj)
        return cast(T, obj)


def _import(path: str) -> object:
    """``"pkg.mod:Attr.sub"`` -> the object."""
    module_name, _, attr = path.partition(":")
    obj: object = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class RegisteredName:
    """``Annotated[str, RegisteredName(REGISTRY)]``: a string that names an entry of ``REGISTRY``
    (checked when the model is validated, without importing a lazily registered built-in) or a
    plugin ``"pkg.mod:Attr"`` (imported and checked then). Validated as a request's (a
    :class:`~routerag.provenance.FromRequest` in the validation context), a plugin name passes only
    when the operator allowed it, and is refused before it is imported otherwise.

    An unknown name is an invalid value (a ``ValueError``, reported by pydantic with its location,
    as any other invalid parameter), or with ``unknown_name=True`` the registry's
    :class:`UnknownNameError` itself, which pydantic lets through (the names a command checks
    first, such as ``EvalConfig.strategy``: the CLI gives them their own exit code). Either message
    lists the valid names. The JSON schema lists the names registered when it is generated
    (``enum``), so the web UI offers them."""

    registry: Registry[Any]
    unknown_name: bool = False

    def check(self, name: str, info: core_schema.ValidationInfo | None = None) -> str:
        try:
            return self.registry.validate_name(name, from_request(info.context) if info is not None else None)
        except UnknownNameError as exc:
            if self.unknown_name:
                raise
            raise ValueError(str(exc)) from None

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.with_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        json_schema = handler(schema)
        json_schema["enum"] = self.registry.names()
        return json_schema
