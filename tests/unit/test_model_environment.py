"""The model environment (``ROUTERAG_MODEL``, ``ROUTERAG_BASE_URL``, ``ROUTERAG_BACKEND``) is read
at the front door and applied to each model configuration it takes — ``open_asker``, ``evaluate``,
``ask_app`` and the MCP server's start — filling only what the configuration leaves unset; below
it, ``ModelConfig.resolved`` reads none. Nothing is loaded: each test stops at the step after the
environment was applied."""

from __future__ import annotations

from pathlib import Path

import pytest

from routerag.llm.config import ModelConfig

pytestmark = pytest.mark.unit

MODEL = "Qwen/Qwen2.5-7B-Instruct"
URL = "http://127.0.0.1:8000/v1"


class Stop(Exception):
    """Raised by a stand-in once it has seen what it was given."""


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ROUTERAG_BACKEND", raising=False)
    monkeypatch.setenv("ROUTERAG_MODEL", MODEL)
    monkeypatch.setenv("ROUTERAG_BASE_URL", URL)
    monkeypatch.setenv("ROUTERAG_HOME", str(tmp_path / "home"))


def _stop_with(seen: list, value: object) -> None:
    seen.append(value)
    raise Stop


def test_open_asker_applies_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from routerag.api.asking import AskParams, open_asker
    from routerag.corpus.schema import Document
    from routerag.index.bundle import build_index
    from routerag.run.config import RunConfig

    build_index([Document.make("Aspirin", "Aspirin lowers fever.")], tmp_path / "bundle", components=["bm25"])
    seen: list = []
    monkeypatch.setattr("routerag.llm.factory.build_model", lambda config: _stop_with(seen, config))
    config = RunConfig(strategy="direct", model=ModelConfig(n_ctx=2048))
    with pytest.raises(Stop):
        open_asker(AskParams(config=config, index_dir=tmp_path / "bundle"))
    assert [(c.model, c.base_url, c.n_ctx) for c in seen] == [(MODEL, URL, 2048)]


def test_evaluate_applies_it_to_the_model_and_the_judge(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from routerag.api.evaluating import EvaluateParams, evaluate
    from routerag.eval.config import EvalConfig

    seen: list = []
    monkeypatch.setattr("routerag.eval.setup.build_setup", lambda cfg, **_: _stop_with(seen, cfg))
    config = EvalConfig(model=ModelConfig(model="own.gguf"), judge_model=ModelConfig())
    with pytest.raises(Stop):
        evaluate(EvaluateParams(config=config, out=tmp_path / "run", progress=False))
    cfg = seen[0]
    assert (cfg.model.model, cfg.model.base_url) == ("own.gguf", URL)  # what the configuration names stays
    assert cfg.judge_model is not None and (cfg.judge_model.model, cfg.judge_model.base_url) == (MODEL, URL)


def test_the_service_applies_it_once_at_the_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from routerag.api.serving import ServeParams, ask_app
    from routerag.llm.scripted import ScriptedModel
    from routerag.server.settings import ServiceSettings
    from routerag.sources.sourceset import SourceSet

    built: list[ModelConfig] = []
    monkeypatch.setattr("routerag.api.serving.mounted_sources", lambda *_: SourceSet())
    monkeypatch.setattr("routerag.llm.factory.build_model", lambda config: built.append(config) or ScriptedModel(["x"]))
    monkeypatch.setattr("routerag.server.app.create_app",
                        lambda model, sources, settings, *, model_config: _stop_with(built, model_config))
    with pytest.raises(Stop):
        ask_app(ServeParams(index_dir=tmp_path), ServiceSettings(data_dir=tmp_path / "data"))
    assert [(c.model, c.base_url) for c in built] == [(MODEL, URL)] * 2  # the model built and the service's config


def test_the_mcp_server_applies_it_at_its_start(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from routerag.corpus.schema import Document
    from routerag.index.bundle import build_index
    from routerag.integrations.mcp_tools import McpSettings, McpTools
    from routerag.sources.bm25 import BM25Source
    from routerag.sources.sourceset import SourceSet

    bundle = build_index([Document.make("Aspirin", "Aspirin lowers fever.")], tmp_path / "bundle", components=["bm25"])
    tools = McpTools(SourceSet([BM25Source.from_bundle(bundle, name="passage")]), McpSettings(),
                     index_dir=tmp_path / "bundle", documents=1)
    model = tools.answerer.preparation.model
    assert model is not None and (model.model, model.base_url) == (MODEL, URL)


def test_below_the_front_door_nothing_reads_it() -> None:
    resolved = ModelConfig().resolved()
    assert (resolved.backend, resolved.model, resolved.base_url) == ("llamacpp", "bundled:qwen2.5-coder-0.5b", None)
