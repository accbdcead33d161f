"""The registry: lazy built-ins, plugin names ``"pkg.mod:Attr"`` imported on lookup with clear
errors, every entry checked against what its registry holds, ``RegisteredName`` fields that accept
what a plugin registers without editing core code, and values from a request
(``routerag.provenance``): registered names and allowed plugins only, refused before any import,
and paths inside the data folder only."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import BaseModel, ValidationError

from routerag.provenance import FromRequest, NameOrPath
from routerag.registry import (
    Kind,
    PluginError,
    RefusedPluginError,
    RegisteredName,
    Registry,
    UnknownNameError,
    WrongKindError,
    callables_taking,
    classes_with,
    instances_of,
    is_plugin_name,
)

ANYTHING = Kind("anything", lambda obj: True)


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A real module on sys.path, as a plugin package would be installed."""
    (tmp_path / "my_plugin_mod.py").write_text(textwrap.dedent('''
        class Thing:
            pass

        def make():
            return "made"

        def make_from(deps):
            return ("made from", deps)

        NOT_A_THING = 3
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_plugin_mod"
    sys.modules.pop("my_plugin_mod", None)


def test_lazy_entries_import_only_on_get() -> None:
    reg: Registry[object] = Registry("thing", ANYTHING)
    reg.register("dumps", "json:dumps")
    assert reg.validate_name("dumps") == "dumps"
    assert reg._entries["dumps"] == "json:dumps"  # checking a name imports nothing
    import json

    assert reg.get("dumps") is json.dumps


def test_plugin_names_are_imported_on_lookup(plugin_module: str) -> None:
    reg: Registry[object] = Registry("thing", callables_taking())
    assert is_plugin_name(f"{plugin_module}:Thing") and not is_plugin_name("file:/tmp/x.json")
    thing = reg.get(f"{plugin_module}:Thing")
    assert thing.__name__ == "Thing" and reg.get(f"{plugin_module}:make")() == "made"
    assert reg.names() == []  # a plugin is used, not registered


def test_plugin_failures_say_what_failed(plugin_module: str) -> None:
    reg: Registry[object] = Registry("thing", callables_taking())
    with pytest.raises(PluginError, match="cannot import module 'no_such_plugin_mod'"):
        reg.get("no_such_plugin_mod:Thing")
    with pytest.raises(PluginError, match=f"module '{plugin_module}' has no attribute 'Nope'"):
        reg.get(f"{plugin_module}:Nope")
    with pytest.raises(PluginError, match=r"is not a thing \(a function or class called with \(\)\)"):
        reg.get(f"{plugin_module}:NOT_A_THING")
    reg.register("a", "json:dumps")
    with pytest.raises(UnknownNameError, match="unknown thing 'nope'; valid: a"):
        reg.get("nope")
    assert issubclass(PluginError, UnknownNameError)


def test_registered_name_fields_follow_the_registry(plugin_module: str) -> None:
    reg: Registry[object] = Registry("thing", ANYTHING)
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


# ------------------------------------------------------------------ what a registry holds


def test_factories_are_python_functions_or_classes_with_the_declared_signature(plugin_module: str) -> None:
    """``builtins:print``, ``sys:exit`` and ``os:abort`` are callables, but no router factory: a
    builtin is refused, and so is a function that cannot take the declared arguments."""
    factories: Registry[object] = Registry("router", callables_taking("deps"))
    assert factories.get(f"{plugin_module}:make_from")("d") == ("made from", "d")
    for name in ("builtins:print", "sys:exit", "os:abort", f"{plugin_module}:make", f"{plugin_module}:Thing",
                 f"{plugin_module}:NOT_A_THING"):  # Thing() and make() take no argument
        with pytest.raises(PluginError, match=r"is not a router \(a function or class called with \(deps\)\)"):
            factories.get(name)
    with pytest.raises(PluginError, match="is not a router"):
        factories.validate_name("builtins:print")  # as a configuration is loaded: before anything calls it


def test_a_builtin_swapped_for_a_python_function_is_still_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A progress bar (Ray Data's) replaces ``builtins.print`` with a Python function taking
    ``*args``: ``builtins:print`` is refused all the same, as a plugin and as a lazy entry."""
    import builtins

    monkeypatch.setattr(builtins, "print", lambda *args, **kwargs: None)
    factories: Registry[object] = Registry("router", callables_taking("deps"))
    with pytest.raises(PluginError, match=r"is not a router \(a function or class called with \(deps\)\)"):
        factories.get("builtins:print")
    factories.register("lazy", "builtins:print")
    with pytest.raises(WrongKindError, match=r"router 'lazy' \(builtins:print\)"):
        factories.get("lazy")


def test_classes_and_instances_are_checked_too(plugin_module: str) -> None:
    classes: Registry[type] = Registry("strategy", classes_with("Params", "run"))
    with pytest.raises(PluginError, match="is not a strategy \\(a class with Params and run\\)"):
        classes.get(f"{plugin_module}:Thing")
    specs: Registry[int] = Registry("number", instances_of(int))
    assert specs.get(f"{plugin_module}:NOT_A_THING") == 3
    with pytest.raises(PluginError, match="is not a number \\(a int\\)"):
        specs.get(f"{plugin_module}:make")


def test_registered_objects_and_lazy_built_ins_are_checked_before_use() -> None:
    reg: Registry[object] = Registry("metric", callables_taking("prediction", "golds"))
    reg.register("ok", lambda prediction, golds: 1.0)
    with pytest.raises(WrongKindError, match="metric 'bad': .* is not a function or class called with"):
        reg.register("bad", lambda prediction: 1.0)
    with pytest.raises(WrongKindError, match="metric 'decorated'"):
        reg.register("decorated")(max)  # a builtin (``print`` may have been swapped for a Python function)
    assert reg.names() == ["ok"]  # nothing of the wrong kind was registered
    reg.register("lazy", "builtins:print")  # a lazy entry is checked when it is imported
    with pytest.raises(WrongKindError, match="metric 'lazy' \\(builtins:print\\)"):
        reg.get("lazy")


def test_every_registry_holds_what_it_declares() -> None:
    """Each built-in registry's entries pass its own check (a strategy, a backend, a metric ...)."""
    import routerag.corpus.datasets as datasets
    import routerag.corpus.loaders as loaders
    import routerag.eval.metrics as metrics
    import routerag.index.component as component
    import routerag.llm.backends as backends
    import routerag.routing as routing
    import routerag.sources.registry as sources
    import routerag.strategies as strategies
    import routerag.strategies.selectors as selectors
    import routerag.train.rewards as rewards

    registries = [datasets.DATASETS, loaders.CORPUS_FORMATS, loaders.QUESTION_FORMATS, metrics.METRICS,
                  component.COMPONENTS, backends.BACKENDS, routing.ROUTERS, sources.SOURCES, strategies.STRATEGIES,
                  selectors.SELECTORS, rewards.REWARDS]
    for registry in registries:
        for name in registry.names():
            try:
                registry.get(name)
            except ImportError:  # an optional dependency of that entry is missing
                continue


# ------------------------------------------------------------------ values from a request


@pytest.fixture
def noisy_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A plugin module whose import leaves a mark (as ``this`` prints the Zen of Python)."""
    (tmp_path / "noisy_plugin_mod.py").write_text("IMPORTED = True\n\ndef make(deps):\n    return deps\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "noisy_plugin_mod"
    sys.modules.pop("noisy_plugin_mod", None)


def test_a_request_names_registered_parts_and_allowed_plugins_only(noisy_plugin: str) -> None:
    reg: Registry[object] = Registry("router", callables_taking("deps"))
    reg.register("learned", "json:dumps")
    request = FromRequest()
    for name in (f"{noisy_plugin}:make", "this:x", "sys:exit", "os:abort", "builtins:print"):
        with pytest.raises(RefusedPluginError, match=r"a request names a registered router \(learned\); other plugins"):
            reg.get(name, request)
        with pytest.raises(RefusedPluginError):
            reg.validate_name(name, request)
    assert noisy_plugin not in sys.modules and "this" not in sys.modules  # refused before any import
    with pytest.raises(UnknownNameError, match="unknown router 'nope'; valid: learned$"):  # no plugin offered
        reg.get("nope", request)
    allowed = FromRequest(plugins=frozenset({f"{noisy_plugin}:make"}))
    assert reg.validate_name(f"{noisy_plugin}:make", allowed) == f"{noisy_plugin}:make"  # the operator's choice
    assert noisy_plugin in sys.modules
    with pytest.raises(RefusedPluginError, match=rf"registered router \(learned\) or an allowed plugin \({noisy_plugin}:make\)"):
        reg.get("sys:exit", allowed)
    assert reg.validate_name("learned", request) == "learned"
    assert reg.get(f"{noisy_plugin}:make")("d") == "d"  # the operator's configuration: any plugin


def test_registered_name_fields_validated_as_a_request(noisy_plugin: str) -> None:
    reg: Registry[object] = Registry("router", callables_taking("deps"))
    reg.register("learned", "json:dumps")

    class Params(BaseModel):
        router: Annotated[str, RegisteredName(reg)] = "learned"
        routers: dict[str, Annotated[str, RegisteredName(reg)]] = {}

    request = FromRequest().context()
    with pytest.raises(ValidationError, match="router\n  Value error, router 'this:x': a request names"):
        Params.model_validate({"router": "this:x"}, context=request)
    with pytest.raises(ValidationError, match="routers.a\n  Value error, router 'sys:exit': a request names"):
        Params.model_validate_json('{"routers": {"a": "sys:exit"}}', strict=True, context=request)
    assert "this" not in sys.modules and noisy_plugin not in sys.modules
    assert Params.model_validate({"router": f"{noisy_plugin}:make"}).router == f"{noisy_plugin}:make"  # configured


def test_paths_from_a_request_stay_inside_the_data_folder(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "routers" / "mine").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "manifest.json").write_text("{}")
    (data / "link").symlink_to(outside)

    class Params(BaseModel):
        model: Annotated[str, NameOrPath("router model", lambda: ["shipped"])] | None = None

    request = FromRequest(data_dir=data).context()

    def refusal(value: str, context: dict | None = request) -> str:
        with pytest.raises(ValidationError) as caught:
            Params.model_validate({"model": value}, context=context)
        return caught.value.errors()[0]["msg"].replace(repr(value), "VALUE")

    assert Params.model_validate({"model": "shipped"}, context=request).model == "shipped"
    assert Params.model_validate({"model": None}, context=request).model is None
    inside = str((data / "routers" / "mine").resolve())
    assert Params.model_validate({"model": "routers/mine"}, context=request).model == inside  # from the data folder
    assert Params.model_validate({"model": inside}, context=request).model == inside
    for value in ("routers/none", "~", "sys:exit"):  # inside the data folder (no home folder, no import)
        assert "nothing of that name in the service's data folder" in refusal(value)
    # outside: one message, whether the path exists or not (a folder with a manifest, a file, nothing)
    messages = {refusal(value) for value in (str(outside), str(outside / "manifest.json"), str(outside / "none"),
                                             "../outside", "link", "link/manifest.json", "/etc/passwd")}
    assert messages == {"Value error, router model VALUE: a request names one of shipped or a path inside the "
                        "service's data folder; other paths are the operator's to configure"}
    no_folder = FromRequest().context()  # a server without a data folder takes shipped names only
    assert "this service takes no paths from requests" in refusal(inside, no_folder)
    assert Params.model_validate({"model": str(outside)}).model == str(outside)  # the operator's: any path
