"""Requests name, operators configure (docs/concepts/security.md).

Every plugin-valued (``RegisteredName``), path-valued (``NameOrPath``) and operator-only
(``OperatorOnly``: the keyword router's rules) param is found by walking
the registered strategies' ``Params`` models, so a new field is covered without editing this file.
Each one gets ``sys:exit``, ``os:abort``, ``builtins:print``, ``this:x`` and paths outside the data
folder, directly, as the params of a choice of ``adaptive`` (``strategy_params``) and, for the
strategy name itself, on every route that takes params (``/v1/ask``, ``/v1/ask/stream``,
``/v1/chat/completions`` plain and streamed with the ``routerag`` extension, ``/v1/runs``) and
through the MCP ``ask`` tool; the MCP ``route`` tool's router and router model (its request
model walked the same way) get them too. Each request is refused (422 / an MCP error result) with a message
naming the value, the service answers afterwards, nothing was printed, and ``this`` (whose import
prints the Zen of Python) was never imported.

The operator's configuration keeps its plugins: a router plugin named in YAML or with ``--set``
loads and answers, one listed in ``security.allowed_plugins`` is taken from a request, and a
factory of the wrong kind is refused clearly when the configuration is loaded.
"""

from __future__ import annotations

import json
import sys
import textwrap
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel

from routerag.corpus.schema import Document
from routerag.edge.settings import SecuritySettings
from routerag.llm.config import ModelConfig
from routerag.llm.scripted import ScriptedModel
from routerag.provenance import NameOrPath, OperatorOnly
from routerag.registry import RegisteredName
from routerag.server.app import create_app
from routerag.server.settings import ServiceSettings
from routerag.sources.sourceset import SourceSet
from routerag.strategies import STRATEGIES

CODE = ["sys:exit", "os:abort", "builtins:print", "this:x"]
QUESTION = "Where is Leeds?"
CHOICE = "direct"  # a choice of adaptive's default strategies: where a per-choice mapping puts the value
DOCS = [("Leeds", "Leeds is a city in West Yorkshire."), ("Zorblax", "Zorblax is a moon of Neptune.")]


# ------------------------------------------------------------------ the fields, found by walking the models


@dataclass(frozen=True)
class Probe:
    """One hostile request: ``strategy`` with ``params``, refused because of ``value``."""

    where: str
    strategy: str
    params: dict[str, Any]
    value: str


def _marked(annotation: Any, metadata: list[Any]) -> list[tuple[str, Callable[[str], Any]]]:
    """Where ``RegisteredName`` / ``NameOrPath`` / ``OperatorOnly`` apply in a field's type:
    ``(kind, wrap)``, with ``wrap`` putting a string where the field takes it (itself, a mapping's
    value, a list's item)."""
    kinds = {RegisteredName: "name", NameOrPath: "path", OperatorOnly: "operator"}
    found: list[tuple[str, Callable[[str], Any]]] = [
        (kinds[type(m)], lambda v: v) for m in metadata if type(m) in kinds]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return found + _marked(args[0], list(annotation.__metadata__))
    if origin in (typing.Union, types.UnionType):
        return found + [hit for arg in args for hit in _marked(arg, [])]
    if origin is dict:
        return found + [(kind, lambda v, w=wrap: {CHOICE: w(v)}) for kind, wrap in _marked(args[1], [])]
    if origin in (list, tuple, set, frozenset):
        return found + [(kind, lambda v, w=wrap: [w(v)]) for kind, wrap in _marked(args[0], [])]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return found + [(kind, lambda v, k=key, w=wrap: {k: w(v)}) for key, kind, wrap in _fields(annotation)]
    return found


def _fields(model: type[BaseModel]) -> list[tuple[str, str, Callable[[str], Any]]]:
    """Every plugin- or path-valued field of ``model``: ``(key, kind, wrap)``; a mapping field with
    a default (adaptive's ``strategies``) keeps its other entries."""
    out = []
    for key, field in model.model_fields.items():
        default = field.get_default(call_default_factory=True)
        for kind, wrap in _marked(field.annotation, list(field.metadata)):
            keep = default if isinstance(default, dict) and default else None
            out.append((key, kind, (lambda v, w=wrap, d=keep: {**d, **w(v)}) if keep else wrap))
    return out


def _strategies() -> dict[str, type[BaseModel]]:
    out = {}
    for name in STRATEGIES.names():
        try:
            out[name] = STRATEGIES.get(name).Params
        except ImportError:  # an optional dependency is missing: the service does not run it either
            continue
    return out


def walked_fields() -> list[tuple[str, str, str, Callable[[str], Any]]]:
    """``(strategy, key, kind, wrap)`` for every plugin- or path-valued param of every strategy."""
    return [(name, key, kind, wrap) for name, params in _strategies().items() for key, kind, wrap in _fields(params)]


def probes(outside: list[str]) -> list[Probe]:
    """The strategy name itself, every walked field directly, and every field of another strategy
    as the params of one of adaptive's choices."""
    values = [*CODE, *outside]
    out = [Probe("strategy", value, {}, value) for value in values]
    for name, key, _, wrap in walked_fields():
        out += [Probe(f"{name}.{key}", name, {key: wrap(value)}, value) for value in values]
        if name != "adaptive":
            out += [Probe(f"adaptive.strategy_params.x.{key} ({name})", "adaptive",
                          {"strategies": {CHOICE: CHOICE, "x": name}, "strategy_params": {"x": {key: wrap(value)}}}, value)
                    for value in values]
    return out


def test_the_walk_finds_the_known_plugin_and_path_fields():
    """The walk is not empty: the fields the service was first found open through are among them."""
    found = {(name, key, kind) for name, key, kind, _ in walked_fields()}
    assert {("adaptive", "router", "name"), ("adaptive", "strategies", "name"), ("adaptive", "router_model", "path"),
            ("adaptive", "adapters", "path"), ("realroute", "selector", "name"), ("realroute", "router", "name"),
            ("realroute", "router_model", "path"), ("hard-route", "router", "name"),
            ("routerag", "mode_router_model", "path"), ("hard-route", "router_rules", "operator"),
            ("adaptive", "router_rules", "operator")} <= found


# ------------------------------------------------------------------ the service


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("names")
    outside = root / "outside-router"  # a real router model folder outside the data folder: refused all the same
    outside.mkdir()
    (outside / "manifest.json").write_text("{}")
    return {"data": root / "data", "outside": outside, "root": root}


@pytest.fixture(scope="module")
def outside_paths(folders) -> list[str]:
    return [str(folders["outside"]), str(folders["outside"] / "none"), "../outside-router", "/etc/passwd"]


@pytest.fixture(scope="module")
def sources(folders) -> SourceSet:
    from routerag.index.bundle import build_index
    from routerag.sources.bm25 import BM25Source

    bundle = build_index([Document.make(t, x) for t, x in DOCS], folders["root"] / "bundle", components=["bm25"])
    return SourceSet([BM25Source.from_bundle(bundle, name="passage")])


@pytest.fixture(scope="module")
def client(sources, folders) -> Iterator[TestClient]:
    app = create_app(ScriptedModel(["Leeds"], cycle=True), sources, ServiceSettings(data_dir=folders["data"]))
    with TestClient(app, base_url="http://127.0.0.1") as running:
        yield running


def _ask(client: TestClient, path: str, strategy: str, params: dict[str, Any]) -> tuple[int, str]:
    r = client.post(path, json={"question": QUESTION, "strategy": strategy, "params": params})
    return r.status_code, r.text


def _chat(client: TestClient, strategy: str, params: dict[str, Any], stream: bool) -> tuple[int, str]:
    r = client.post("/v1/chat/completions", json={"model": strategy, "stream": stream, "routerag": {"params": params},
                                                  "messages": [{"role": "user", "content": QUESTION}]})
    return r.status_code, r.text


def _run(client: TestClient, strategy: str, params: dict[str, Any]) -> tuple[int, str]:
    r = client.post("/v1/runs", json={"questions": [{"question": QUESTION}],
                                      "configs": [{"strategy": "direct"}, {"strategy": strategy, "params": params}]})
    return r.status_code, r.text


ROUTES: dict[str, Callable[[TestClient, str, dict[str, Any]], tuple[int, str]]] = {
    "/v1/ask": lambda c, s, p: _ask(c, "/v1/ask", s, p),
    "/v1/ask/stream": lambda c, s, p: _ask(c, "/v1/ask/stream", s, p),
    "/v1/chat/completions": lambda c, s, p: _chat(c, s, p, stream=False),
    "/v1/chat/completions (stream)": lambda c, s, p: _chat(c, s, p, stream=True),
    "/v1/runs": _run,
}


def _refused(probe: Probe, status: int, text: str) -> str | None:
    """Why the reply is not the refusal it must be (None: it is)."""
    if probe.where == "strategy" and status == 404 and "model" in text:
        return None  # the chat endpoint: a model name that is no strategy is an unknown model (OpenAI's 404)
    if status != 422:
        return f"{status}: {text[:300]}"
    if json.dumps(probe.value)[1:-1] not in text:
        return f"the refusal does not name {probe.value!r}: {text[:300]}"
    return None


def _still_serving(client: TestClient) -> None:
    assert "this" not in sys.modules, "a module a request named was imported"
    r = client.post("/v1/ask", json={"question": QUESTION, "strategy": "direct"})
    assert r.status_code == 200 and r.json()["answer"] == "Leeds", r.text


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_no_route_takes_code_or_outside_paths_from_a_request(client, outside_paths, capfd, route):
    send = ROUTES[route]
    failures = []
    for probe in probes(outside_paths):
        status, text = send(client, probe.strategy, probe.params)
        if (why := _refused(probe, status, text)) is not None:
            failures.append(f"{route} {probe.where} = {probe.value!r} -> {why}")
        assert "this" not in sys.modules, f"{route} {probe.where} = {probe.value!r} imported `this`"
        assert client.get("/health").status_code == 200
    assert not failures, "\n".join(failures[:20]) + f"\n({len(failures)} in all)"
    _still_serving(client)
    printed = capfd.readouterr()
    assert "RouterDeps" not in printed.out + printed.err and "Zen of Python" not in printed.out + printed.err


def test_an_outside_path_is_refused_the_same_whether_it_exists_or_not(client, folders):
    replies = set()
    for path in (folders["outside"], folders["outside"] / "manifest.json", folders["outside"] / "none"):
        status, text = ROUTES["/v1/ask"](client, "adaptive", {"router_model": str(path)})
        assert status == 422
        replies.add(text.replace(json.dumps(str(path))[1:-1], "PATH"))
    assert len(replies) == 1, replies


# ------------------------------------------------------------------ the MCP ask tool


@pytest.fixture(scope="module")
def mcp_tools(sources, folders):
    pytest.importorskip("mcp")
    from routerag.integrations.mcp_tools import McpSettings, McpTools

    settings = McpSettings(model=ModelConfig(backend="scripted", scripted_outputs=["Leeds"]))
    return McpTools(sources, settings, index_dir=folders["root"] / "bundle", documents=len(DOCS))


def test_the_mcp_ask_tool_takes_no_code_or_outside_paths(mcp_tools, outside_paths, capfd):
    from mcp import Client

    from routerag.integrations.mcp_server import build_server

    server = build_server(mcp_tools)
    failures = []

    async def calls() -> None:
        async with Client(server) as session:  # the SDK's client, connected in-process
            for probe in probes(outside_paths):
                result = await session.call_tool("ask", {"question": QUESTION, "strategy": probe.strategy,
                                                         "params": probe.params})
                text = result.content[0].text if result.content else ""
                if not result.is_error or probe.value not in text:
                    failures.append(f"ask {probe.where} = {probe.value!r} -> {result.is_error}: {text[:300]}")
                assert "this" not in sys.modules, f"ask {probe.where} = {probe.value!r} imported `this`"
            answered = await session.call_tool("ask", {"question": QUESTION, "strategy": "direct"})
            assert not answered.is_error and answered.structured_content["answer"] == "Leeds", answered.content

    anyio.run(calls)
    assert not failures, "\n".join(failures[:20]) + f"\n({len(failures)} in all)"
    printed = capfd.readouterr()
    assert "RouterDeps" not in printed.out + printed.err


def test_the_mcp_route_tool_takes_no_code_or_outside_paths(mcp_tools, outside_paths, capfd):
    """Every plugin-, path- or operator-valued field of the ``route`` tool's request model, walked
    as the strategies' params are, gets each hostile value."""
    from mcp import Client

    from routerag.integrations.mcp_server import build_server
    from routerag.integrations.mcp_tools import RouteRequest

    fields = _fields(RouteRequest)
    assert {(key, kind) for key, kind, _ in fields} >= {("router", "name"), ("router_model", "path")}
    failures = []

    async def calls() -> None:
        async with Client(build_server(mcp_tools)) as session:
            for key, _, wrap in fields:
                for value in [*CODE, *outside_paths]:
                    result = await session.call_tool("route", {"query": QUESTION, key: wrap(value)})
                    text = result.content[0].text if result.content else ""
                    if not result.is_error or value not in text:
                        failures.append(f"route {key} = {value!r} -> {result.is_error}: {text[:300]}")
                    assert "this" not in sys.modules, f"route {key} = {value!r} imported `this`"
            searched = await session.call_tool("search", {"query": QUESTION})
            assert not searched.is_error and searched.structured_content["hits"][0]["title"] == "Leeds"

    anyio.run(calls)
    assert not failures, "\n".join(failures[:20]) + f"\n({len(failures)} in all)"
    printed = capfd.readouterr()
    assert "RouterDeps" not in printed.out + printed.err


# ------------------------------------------------------------------ plugins the operator names


@pytest.fixture
def router_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A router plugin package as an operator would install it."""
    (tmp_path / "names_router_plugin.py").write_text(textwrap.dedent('''
        from routerag.routing import RouteChoice, RouteResult

        class FirstChoice:
            name = "first-choice"

            def __init__(self, deps):
                self.deps = deps

            def route(self, query, choices):
                return RouteResult(ranked=[RouteChoice(name=c, score=1.0) for c in choices], reason="the first")

        def builds_nothing(deps):
            return 42

        NOT_A_FACTORY = 3
    '''))
    (tmp_path / "names_unlisted_plugin.py").write_text("def make(deps):\n    raise SystemExit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "names_router_plugin"
    for name in ("names_router_plugin", "names_unlisted_plugin"):
        sys.modules.pop(name, None)


def _answer_with(params: dict[str, Any]) -> Any:
    from routerag.runtime.base import StrategyContext
    from routerag.strategies.resolve import resolve_strategy

    resolved = resolve_strategy("adaptive", params, shipped_policy=False)
    return resolved.build(StrategyContext(model=ScriptedModel(["Leeds"], cycle=True), sources=SourceSet([]))).run(QUESTION)


def test_plugins_named_in_yaml_or_with_set_still_work(router_plugin, tmp_path):
    from routerag.config import load_config
    from routerag.eval.config import EvalConfig

    config = tmp_path / "eval.yaml"
    config.write_text(textwrap.dedent(f'''
        strategy: adaptive
        params:
          router: "{router_plugin}:FirstChoice"
          strategies: {{a: direct, b: rule}}
    '''))
    from_yaml = load_config(EvalConfig, config)
    from_set = load_config(EvalConfig, None, ["strategy=adaptive", f"params.router={router_plugin}:FirstChoice",
                                              "params.strategies={a: direct, b: rule}"])
    for loaded in (from_yaml, from_set):
        trace = _answer_with(loaded.params)
        assert trace.error is None and trace.answer == "Leeds"
        assert trace.steps[0].route.chosen_by == "first-choice" and trace.steps[0].route.choice == "a"


@pytest.mark.parametrize("factory", ["builtins:print", "sys:exit", "os:abort", "names_router_plugin:NOT_A_FACTORY"])
def test_a_factory_of_the_wrong_kind_is_refused_when_the_configuration_loads(router_plugin, factory):
    from routerag.config import ConfigError, load_config
    from routerag.eval.config import EvalConfig

    with pytest.raises(ConfigError, match=rf"router plugin '{factory}': .* is not a router \(a function or class "
                                          r"called with \(deps: RouterDeps\)\)"):
        load_config(EvalConfig, None, ["strategy=adaptive", f"params.router={factory}"])


def test_a_factory_that_builds_no_router_is_refused_before_it_routes(router_plugin):
    from routerag.routing.base import RoutingError

    with pytest.raises(RoutingError, match=f"router '{router_plugin}:builds_nothing': its factory built int, not a Router"):
        _answer_with({"router": f"{router_plugin}:builds_nothing", "strategies": {"a": "direct", "b": "rule"}})


def test_a_request_takes_the_plugins_the_operator_allowed(router_plugin, sources, tmp_path):
    settings = ServiceSettings(data_dir=tmp_path / "data",
                               security=SecuritySettings(allowed_plugins=[f"{router_plugin}:FirstChoice"]))
    params = {"router": f"{router_plugin}:FirstChoice", "strategies": {"a": "direct", "b": "rule"}}
    with TestClient(create_app(ScriptedModel(["Leeds"], cycle=True), sources, settings), base_url="http://127.0.0.1") as client:
        r = client.post("/v1/ask", json={"question": QUESTION, "strategy": "adaptive", "params": params})
        assert r.status_code == 200, r.text
        assert r.json()["answer"] == "Leeds" and r.json()["steps"][0]["route"]["chosen_by"] == "first-choice"
        unlisted = {**params, "router": "names_unlisted_plugin:make"}
        r = client.post("/v1/ask", json={"question": QUESTION, "strategy": "adaptive", "params": unlisted})
        assert r.status_code == 422 and "a request names a registered router" in r.json()["detail"]
        assert f"{router_plugin}:FirstChoice" in r.json()["detail"]  # offered: the allowed plugin
        assert "names_unlisted_plugin" not in sys.modules


def test_allowed_plugins_are_plugin_names():
    with pytest.raises(ValueError, match="'sys.exit' is not a plugin name"):
        SecuritySettings(allowed_plugins=["sys.exit"])
