"""One front door: the service (``routerag serve`` + ``POST /v1/ask``), ``routerag ask`` and
``routerag demo`` resolve the same request (strategy ``routerag``, default model settings) to the
same model — the bundled 0.5B with the shipped policy adapter — while ``routerag eval`` runs exactly
what its configuration names (its stored untrained-baseline runs keep their fingerprints).

The real commands and the real service run; only ``build_model`` is replaced by a recorder whose
ScriptedModels note which configuration answered, so no model is loaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from conftest import FirstChoice
from routerag.llm.config import BUNDLED_POLICY, ENV_BACKEND, ENV_BASE_URL, ENV_MODEL, ModelConfig, bundled_policy_path
from routerag.llm.scripted import ScriptedModel

CORPUS = Path("2wikimultihopqa") / "2wikimultihopqa_corpus.json"  # in the benchmark data folder
QUESTION = "Who was Teutberga married to?"


class Recorder:
    """Stands in for ``routerag.llm.factory.build_model``: notes each configuration built and
    each one whose model answered."""

    def __init__(self) -> None:
        self.built: list[ModelConfig] = []
        self.answered: list[ModelConfig] = []

    def __call__(self, config: ModelConfig) -> ScriptedModel:
        resolved = config.resolved()
        self.built.append(resolved)

        def reply(messages, params, continue_final) -> str:
            self.answered.append(resolved)
            return "<answer>Lothair II</answer>"

        return ScriptedModel(reply)

    def adapters(self) -> set[Path | None]:
        return {c.adapter_file() for c in self.answered}


@pytest.fixture
def recorder(monkeypatch) -> Recorder:
    for name in (ENV_MODEL, ENV_BASE_URL, ENV_BACKEND):
        monkeypatch.delenv(name, raising=False)
    recorded = Recorder()
    monkeypatch.setattr("routerag.llm.factory.build_model", recorded)
    return recorded


def _cli():
    from routerag.cli.app import app
    from routerag.cli.main import _load

    _load()
    return app


def test_routerag_ask_answers_with_the_shipped_policy(recorder: Recorder, index_dir: Path) -> None:
    result = CliRunner().invoke(_cli(), ["ask", QUESTION, "--index", str(index_dir), "--json"])
    assert recorder.answered, result.output
    assert recorder.adapters() == {bundled_policy_path()}


def test_routerag_ask_untrained_runs_the_base_model(recorder: Recorder, index_dir: Path) -> None:
    result = CliRunner().invoke(_cli(), ["ask", QUESTION, "--index", str(index_dir), "--json", "--untrained"])
    assert recorder.answered, result.output
    assert recorder.adapters() == {None}


def test_the_service_answers_routerag_with_the_policy_the_cli_applies(recorder: Recorder, index_dir: Path,
                                                                       monkeypatch) -> None:
    """The disagreement seen in the browser: the web UI's routerag ran the untrained model."""
    apps = []
    monkeypatch.setattr("routerag.edge.serving.serve", lambda app, host, port, **_: apps.append(app))
    result = CliRunner().invoke(_cli(), ["serve", str(index_dir)])
    assert result.exit_code == 0, result.output
    with TestClient(apps[0], base_url="http://127.0.0.1") as client:
        routerag = client.post("/v1/ask", json={"question": QUESTION, "strategy": "routerag"})
        assert routerag.status_code == 200, routerag.text
        assert recorder.adapters() == {bundled_policy_path()}
        recorder.answered.clear()
        vanilla = client.post("/v1/ask", json={"question": QUESTION, "strategy": "vanilla", "params": {"source": "bm25"}})
        assert vanilla.status_code == 200, vanilla.text
        assert recorder.adapters() == {None}  # the policy was trained for routerag's protocol only
    # the base model is built once at start, the policy model once on first use, each with the
    # backend's concurrency (llama.cpp: 1), as `routerag ask` builds it
    assert [c.adapter_file() for c in recorder.built] == [None, bundled_policy_path()]
    assert recorder.built[1].lora_path == f"policy:{BUNDLED_POLICY}"  # named until the model is built
    assert {c.concurrency for c in recorder.built} == {1}


def test_the_service_keeps_an_adapter_its_model_names(recorder: Recorder, index_dir: Path, monkeypatch,
                                                      tmp_path: Path) -> None:
    own = tmp_path / "own.gguf"
    own.write_bytes(b"GGUF")
    apps = []
    monkeypatch.setattr("routerag.edge.serving.serve", lambda app, host, port, **_: apps.append(app))
    result = CliRunner().invoke(_cli(), ["serve", str(index_dir), "--model-set", f"lora_path={own}"])
    assert result.exit_code == 0, result.output
    with TestClient(apps[0], base_url="http://127.0.0.1") as client:
        assert client.post("/v1/ask", json={"question": QUESTION, "strategy": "routerag"}).status_code == 200
    assert recorder.adapters() == {own}


def test_eval_runs_exactly_its_configuration(recorder: Recorder) -> None:
    """``routerag eval`` applies no shipped policy: docs/results/runs/*-routerag are the untrained
    baseline, and their fingerprints name the model without an adapter."""
    from routerag.eval.config import EvalConfig
    from routerag.eval.setup import build_setup

    config = EvalConfig(dataset="demo", strategy="routerag", components=["bm25"], limit=1)
    setup = build_setup(config, "front-door")
    setup.factory().run(setup.questions[0])
    assert recorder.adapters() == {None}


def test_the_cli_prints_a_routerag_error_as_one_line(index_dir: Path, monkeypatch, capsys) -> None:
    from routerag.cli.main import main

    monkeypatch.setattr("sys.argv", ["routerag", "ask", QUESTION, "--index", str(index_dir), "--strategy", "nope"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: unknown strategy 'nope'; valid: ") and "routerag" in err
    assert "Traceback" not in err


def test_bad_params_are_a_routerag_error_naming_the_param() -> None:
    from routerag.api import StrategyParamsError, resolve_strategy
    from routerag.errors import RouteragError

    with pytest.raises(StrategyParamsError, match="invalid params for strategy 'vanilla': k") as caught:
        resolve_strategy("vanilla", {"k": "many"}, shipped_policy=True)
    assert isinstance(caught.value, RouteragError) and isinstance(caught.value, ValueError)
    with pytest.raises(StrategyParamsError, match="unknown params for strategy 'vanilla': 'kk'"):
        resolve_strategy("vanilla", {"kk": 2}, shipped_policy=True, json_params=True)
    lax = resolve_strategy("vanilla", {"k": "3"}, shipped_policy=True)  # YAML/--set values are converted
    assert lax.params.k == 3 and lax.model is None


@pytest.mark.parametrize("command", [["ask", QUESTION], ["demo", "-n", "1"]])
def test_ask_and_demo_index_the_corpus_with_the_interactive_components(recorder: Recorder, monkeypatch,
                                                                        command: list[str]) -> None:
    """Without ``--index``, ``ask`` and ``demo`` index the dataset's corpus with the front door's
    components; ``eval`` keeps ``EvalConfig.components`` (part of its fingerprint)."""
    from routerag.api import INTERACTIVE_COMPONENTS
    from routerag.eval.config import EvalConfig
    from routerag.sources.sourceset import SourceSet

    asked = []

    def build_sources(dataset, config):
        asked.append(list(config.components))
        return SourceSet(), []

    monkeypatch.setattr("routerag.run.assemble.build_sources", build_sources)
    result = CliRunner().invoke(_cli(), [*command, "--json"])
    assert asked == [list(INTERACTIVE_COMPONENTS)], result.output
    assert recorder.adapters() == {bundled_policy_path()}
    assert EvalConfig().components == ["dense", "bm25"]


# ---------------------------------------------------------------- the api module: the one front door

SRC = Path(__file__).resolve().parents[2] / "src" / "routerag"
# what only the front door (and the layers below it) may call: building a strategy's context, a
# model, an index, a run, an evaluation setup or run, a training run
BUILDERS = {
    "routerag.strategies.StrategyContext", "routerag.runtime.base.StrategyContext",
    "routerag.llm.factory.build_model", "routerag.index.bundle.build_index",
    "routerag.run.assemble.assemble", "routerag.eval.setup.build_setup", "routerag.eval.runner.run_evaluation",
    "routerag.train.recipes.train", "routerag.train.golden_set.build_golden_set",
    "routerag.server.app.create_app", "routerag.server.retrieval_app.create_retrieval_app",
}


def _imports(path: Path) -> set[str]:
    import ast

    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("package", ["cli", "server"])
def test_the_cli_and_the_service_build_through_the_api_only(package: str) -> None:
    # app.py mounts the retrieval app; the service sits below the front door (the import-linter
    # layers), so its uploads index a custom source's documents themselves (BM25, nothing defaulted)
    allowed = {"server": {"routerag.server.retrieval_app.create_retrieval_app", "routerag.index.bundle.build_index"}}.get(package, set())
    found = {f"{path.name}: {name}" for path in sorted((SRC / package).glob("*.py"))
             for name in _imports(path) & (BUILDERS - allowed)}
    assert not found, "build these through routerag.api: " + ", ".join(sorted(found))


def test_the_cli_catches_only_routerag_errors() -> None:
    """Every ``except`` in the CLI names a RouteragError (or Ctrl-C): a refusal is printed as one
    line, anything else is a bug and keeps its traceback."""
    import ast
    import importlib

    from routerag.errors import RouteragError

    for path in sorted((SRC / "cli").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        origin = {alias.asname or alias.name: node.module for node in ast.walk(tree)
                  if isinstance(node, ast.ImportFrom) and node.module for alias in node.names}
        for node in ast.walk(tree):
            if not isinstance(node, ast.ExceptHandler):
                continue
            assert node.type is not None, f"{path.name}:{node.lineno}: a bare except"
            kinds = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            for kind in kinds:
                assert isinstance(kind, ast.Name), f"{path.name}:{node.lineno}: {ast.dump(kind)}"
                if kind.id == "KeyboardInterrupt":
                    continue
                cls = getattr(importlib.import_module(origin[kind.id]), kind.id)
                assert issubclass(cls, RouteragError), f"{path.name}:{node.lineno}: catches {kind.id}"


def test_importing_the_api_loads_nothing_heavy() -> None:
    import subprocess
    import sys

    heavy = ["torch", "transformers", "trl", "llama_cpp", "faiss", "fastapi", "uvicorn", "sentence_transformers"]
    code = ("import sys, routerag.api as api; [getattr(api, n) for n in api.__all__ if n[0].isupper()];"
            f"print(sorted(m for m in {heavy!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_api_ask_reports_each_step_as_it_is_appended(index_dir: Path) -> None:
    from routerag.api import AskParams, ask
    from routerag.eval.config import EvalConfig
    from routerag.llm.config import ModelConfig

    config = EvalConfig(strategy="vanilla", params={"source": "bm25", "k": 2},
                        model=ModelConfig(backend="scripted", scripted_outputs=["Lothair II"]))
    seen: list = []
    trace = ask(QUESTION, AskParams(config=config, index_dir=index_dir), on_step=seen.append)
    assert trace.error is None and trace.answer == "Lothair II"
    assert seen == trace.steps and [s.kind for s in seen] == ["search", "answer"]


def test_api_build_index_and_its_refusals(tmp_path: Path, shared: Path) -> None:
    from routerag.api import IndexParams, IndexRequestError, build_index
    from routerag.errors import RouteragError

    corpus = tmp_path / "corpus.jsonl"
    rows = json.loads((shared / CORPUS).read_text(encoding="utf-8"))[:5]
    corpus.write_text("".join(json.dumps({"title": r["title"], "text": r["text"]}) + "\n" for r in rows), encoding="utf-8")
    params = IndexParams(corpus=str(corpus), out=tmp_path / "idx", components=["bm25"])
    built = build_index(params)
    assert built.documents == 5 and built.components == ["bm25"] and built.added is None
    with pytest.raises(IndexRequestError, match="already exists") as again:
        build_index(params)
    assert isinstance(again.value, RouteragError)
    added = build_index(params.model_copy(update={"add": True}))
    assert added.added == 0 and added.already == 5
    with pytest.raises(RouteragError, match="no such file, and unknown dataset"):
        build_index(params.model_copy(update={"corpus": "no-such-dataset", "out": tmp_path / "other"}))


def test_a_front_door_strategy_resolves_adaptives_choices_through_the_front_door() -> None:
    """The service validates a JSON body strictly; adaptive's choices get the same strictness."""
    from routerag.api import StrategyParamsError, resolve_strategy
    from routerag.routing import ROUTERS
    from routerag.sources.sourceset import SourceSet
    from routerag.strategies import StrategyContext

    if "front-door-first" not in ROUTERS:
        ROUTERS.register("front-door-first", FirstChoice)
    resolved = resolve_strategy("adaptive", {"router": "front-door-first", "strategies": {"a": "direct", "b": "vanilla"},
                                             "strategy_params": {"b": {"k": "3"}}}, shipped_policy=True, json_params=True)
    context = StrategyContext(model=ScriptedModel(lambda *a: "x"), sources=SourceSet())
    with pytest.raises(StrategyParamsError, match="invalid params for strategy 'vanilla': k"):
        resolved.build(context)  # "3" for an integer: refused in a JSON body
    lax = resolve_strategy("adaptive", {"router": "front-door-first", "strategies": {"a": "direct", "b": "vanilla"},
                                        "strategy_params": {"b": {"k": "3"}}}, shipped_policy=False)
    assert lax.build(context).runners["b"].params.k == 3  # a YAML configuration's values are converted


def test_an_adaptive_choice_with_its_own_adapter_runs_on_the_runs_model_configuration_with_it(tmp_path) -> None:
    """adaptive's `adapters`: one choice (e.g. routerag's trained policy) on the run's model
    configuration + a LoRA adapter, built on first use; the other choices on the context's model."""
    from routerag.api import StrategyParamsError, resolve_strategy
    from routerag.llm.config import ModelConfig
    from routerag.llm.factory import DeferredModel
    from routerag.routing import ROUTERS
    from routerag.sources.sourceset import SourceSet
    from routerag.strategies import STRATEGIES, StrategyContext

    if "front-door-first" not in ROUTERS:
        ROUTERS.register("front-door-first", FirstChoice)
    adapter = tmp_path / "adapter.gguf"
    params = {"router": "front-door-first", "strategies": {"a": "direct", "b": "direct"}, "adapters": {"b": str(adapter)}}
    model = ModelConfig(backend="llamacpp", model="base.gguf", n_threads=1)
    context = StrategyContext(model=ScriptedModel(lambda *a: "London"), sources=SourceSet())
    adaptive = resolve_strategy("adaptive", params, model, shipped_policy=False).build(context)
    plain, with_adapter = adaptive.runners["a"], adaptive.runners["b"]
    assert plain.context.model is context.model
    assert plain.run("What is the capital of France?").answer == "London"
    deferred = with_adapter.context.model
    assert isinstance(deferred, DeferredModel) and deferred.config == model.model_copy(update={"lora_path": adapter})
    # an adapter on a backend that takes none is refused when adaptive is built, not at a question
    scripted = ModelConfig(backend="scripted", scripted_outputs=["Paris"])
    with pytest.raises(StrategyParamsError, match="llamacpp backend only"):
        resolve_strategy("adaptive", params, scripted, shipped_policy=False).build(context)
    # without the run's model configuration there is nothing to apply the adapter to
    with pytest.raises(StrategyParamsError, match="no model configuration"):
        resolve_strategy("adaptive", params, None, shipped_policy=False).build(context)
    with pytest.raises(ValueError, match="front door"):  # the strategies layer alone cannot either
        STRATEGIES.get("adaptive")(context, params)
    with pytest.raises(ValueError, match="adapters for unknown choices"):
        STRATEGIES.get("adaptive")(context, {**params, "adapters": {"c": str(adapter)}})
