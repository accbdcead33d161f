"""Where the values being validated come from, and what that lets them name.

**Requests name, operators configure.** The operator's configuration (a YAML file, ``--set``,
Python code) may name any registered part, any plugin (``"pkg.mod:Attr"``, imported on lookup) and
any path. What a request sends (an HTTP body, the chat endpoint's ``routerag`` extension, an MCP
tool call) is validated with a :class:`FromRequest`: a registry-named field
(:class:`~routerag.registry.RegisteredName`) takes registered names and the plugin names the
operator allowed, and any other plugin name is refused *before anything is imported*; a
path-valued field (:class:`NameOrPath`) takes the names it lists and paths inside the service's data
folder, and refuses any other path with one message, whether it exists or not.

A model is validated as a request's by passing ``context=request.context()`` to pydantic
(``model_validate``, ``model_validate_json``); without that context a value is the operator's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema

CONTEXT_KEY = "from_request"
"""The key of a pydantic validation context that holds the :class:`FromRequest` of the values."""


@dataclass(frozen=True)
class FromRequest:
    """The values come from a request: they may name registered parts, the plugins in ``plugins``
    (the operator's allow-list) and paths inside ``data_dir`` (none without one)."""

    plugins: frozenset[str] = frozenset()
    data_dir: Path | None = None

    def context(self) -> dict[str, Any]:
        """The pydantic validation context that validates a model as this request's."""
        return {CONTEXT_KEY: self}

    def allows_plugin(self, name: str) -> bool:
        return name in self.plugins

    def local_path(self, value: str) -> str | None:
        """``value`` as an absolute path inside ``data_dir`` (a relative one is taken from there, ``~``
        is not expanded, links are followed), or None when it is outside or there is no data folder.
        What it returns does not depend on whether the path exists."""
        if self.data_dir is None:
            return None
        root = os.path.realpath(self.data_dir)
        path = os.path.realpath(os.path.join(root, value))
        return path if os.path.commonpath([root, path]) == root else None


def from_request(context: object) -> FromRequest | None:
    """The :class:`FromRequest` of a validation context (``ValidationInfo.context``); None: the
    values are the operator's."""
    if isinstance(context, dict):
        found = context.get(CONTEXT_KEY)
        return found if isinstance(found, FromRequest) else None
    return None


@dataclass(frozen=True)
class NameOrPath:
    """``Annotated[str, NameOrPath("router model", names)]``: a value that is one of ``names()``
    (a shipped part, nothing to check) or a path.

    From the operator's configuration any value passes unchanged. From a request (a
    :class:`FromRequest` context) a name passes, and a path only when it lies inside the request's
    data folder and exists (it becomes that absolute path); a path outside is an invalid value
    whose message is the same whether the path exists or not. The check runs before the field's
    own validation (put it last in ``Annotated``), so a value another validator would turn into a
    path (a shipped policy's ``policy:NAME``) is still seen as sent."""

    what: str
    names: Callable[[], Iterable[str]]

    def check(self, value: Any, info: core_schema.ValidationInfo) -> Any:
        request = from_request(info.context)
        if request is None or not isinstance(value, str):
            return value  # the operator's value, or one that the field's own type refuses
        names = sorted(self.names())
        if not value or value in names:
            return value
        inside = request.local_path(value)
        if inside is not None:
            if not os.path.exists(inside):
                raise ValueError(f"{self.what} {value!r}: nothing of that name in the service's data folder")
            return inside
        named = f"one of {', '.join(names)}" if names else "no name"
        where = ("or a path inside the service's data folder" if request.data_dir is not None
                 else "(this service takes no paths from requests)")
        raise ValueError(f"{self.what} {value!r}: a request names {named} {where}; other paths are the operator's "
                         "to configure")

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.with_info_before_validator_function(self.check, handler(source))


@dataclass(frozen=True)
class OperatorOnly:
    """``Annotated[str, OperatorOnly("router rules")]``: a value only the operator's configuration
    sets, because what it holds or names is run as given (the keyword router's regular
    expressions: a hostile pattern can backtrack for minutes). From the operator's configuration
    any value passes unchanged; from a request (a :class:`FromRequest` context) every value is
    refused, a path inside the data folder included (an upload lands there). Put it last in
    ``Annotated``, so the value is refused as sent."""

    what: str

    def check(self, value: Any, info: core_schema.ValidationInfo) -> Any:
        if from_request(info.context) is None or value is None:
            return value
        raise ValueError(f"{self.what} {value!r}: a request cannot set them; they are the operator's to configure")

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.with_info_before_validator_function(self.check, handler(source))
