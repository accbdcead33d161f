"""The registry: lazy built-ins, plugin names ``"pkg.mod:Attr"`` imported on lookup with clear
errors, and ``RegisteredName`` fields that accept what a plugin registers without editing core code."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import BaseModel, ValidationError

from routerag.registry import PluginError, RegisteredName, Registry, UnknownNameError, is_plugin_name


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A real module on sys.path, as a plugin package would be installed."""
    (tmp_path / "my_plugin_mod.py").write_text(textwrap.dedent('''
        class Thing:
            pass

        def make():
            return "made"

        NOT_A_THING = 3
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_plugin_mod"
    sys.modules.pop("my_plugin_mod", None)


def test_lazy_entries_import_only_on_get() -> None:
    reg: Registry[object] = Registry("thing")
    reg.register("dumps", "json:dumps")
    assert reg.validate_name("dumps") == "dumps"
    assert reg._entries["dumps"] == "json:dumps"  # checking a name imports nothing
    import json

    assert reg.get("dumps") is json.dumps


def test_plugin_names_are_imported_on_lookup(plugin_module: str) -> None:
    reg: Registry[object] = Registry("thing", check=callable)
    assert is_plugin_name(f"{plugin_module}:Thing") and not is_plugin_name("file:/tmp/x.json")
    thing = reg.get(f"{plugin_module}:Thing")
    assert thing.__name__ == "Thing" and reg.get(f"{plugin_module}:make")() == "made"
    assert reg.names() == []  # a plugin is used, not registered


def test_plugin_failures_say_what_failed(plugin_module: str) -> None:
    reg: Registry[object] = Registry("thing", check=callable)
    with pytest.raises(PluginError, match="cannot import module 'no_such_plugin_mod'"):
        reg.get("no_such_plugin_mod:Thing")
    with pytest.raises(PluginError, match=f"module '{plugin_module}' has no attribute 'Nope'"):
        reg.get(f"{plugin_module}:Nope")
    with pytest.raises(PluginError, match="is not a thing"):
        reg.get(f"{plugin_module}:NOT_A_THING")
    reg.register("a", "json:dumps")
    with pytest.raises(UnknownNameError, match="unknown thing 'nope'; valid: a"):
        reg.get("nope")
    assert issubclass(PluginError, UnknownNameError)


def test_registered_name_fields_follow_the_registry(plugin_module: str) -> None:
    reg: Registry[object] = Registry("thing")
    reg.register("builtin", "json:dumps")

    class Conf(BaseModel):
        part: Annotated[str, RegisteredName(reg, unknown_name=True)] = "builtin"

    class Params(BaseModel):
        part: Annotated[str, RegisteredName(reg)] = "builtin"

    assert Conf.model_json_schema()["properties"]["part"]["enum"] == ["builtin"]
    with pytest.raises(UnknownNameError, match="unknown thing 'later'"):
        Conf(part="later")
    with pytest.raises(ValidationError, match="part\n  Value error, unknown thing 'later'; valid: builtin"):
        Params(part="later")  # in a Params model, an invalid parameter like any other
    reg.register("later", object())  # a plugin registers a part: accepted, no core edit
    assert Conf(part="later").part == "later"
    assert "later" in Conf.model_json_schema()["properties"]["part"]["enum"]
    assert Conf(part=f"{plugin_module}:Thing").part == f"{plugin_module}:Thing"
    with pytest.raises(PluginError):
        Conf(part=f"{plugin_module}:Missing")
