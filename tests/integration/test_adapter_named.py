"""The policy adapter that answers is named: in each trace's params, a service run's config, the
service's /v1/info (the web UI's header reads it there)."""

from __future__ import annotations

import hashlib

from fastapi.testclient import TestClient

from routerag.llm.concurrency import LimitedModel
from routerag.llm.config import ModelConfig
from routerag.llm.factory import adapter_label
from routerag.llm.scripted import ScriptedModel
from routerag.server.app import create_app
from routerag.server.settings import ServiceSettings
from routerag.strategies.resolve import answer, resolve_strategy


def _adapter(tmp_path):
    path = tmp_path / "policy-v2.gguf"
    path.write_bytes(b"GGUF lora weights")
    return path, f"policy-v2.gguf@sha256:{hashlib.sha256(b'GGUF lora weights').hexdigest()[:12]}"


def test_adapter_label(tmp_path):
    path, label = _adapter(tmp_path)
    assert adapter_label(ModelConfig(lora_path=path)) == label
    assert adapter_label(ModelConfig()) is None and adapter_label(None) is None
    assert adapter_label(ModelConfig(lora_path=tmp_path / "gone.gguf")) == "gone.gguf@missing"


def test_the_trace_names_the_adapter_that_answered(tmp_path, sources):
    path, label = _adapter(tmp_path)
    resolved = resolve_strategy("vanilla", {"source": "bm25", "k": 2}, ModelConfig(lora_path=path), shipped_policy=False)
    assert resolved.adapter == label
    trace = answer(resolved, ScriptedModel(["Lothair II"]), sources, "Who was Teutberga married to?")
    assert trace.error is None and trace.params["adapter"] == label and trace.params["k"] == 2
    plain = resolve_strategy("vanilla", {"source": "bm25"}, ModelConfig(), shipped_policy=False)
    assert "adapter" not in answer(plain, ScriptedModel(["x"]), sources, "q").params  # a base model: nothing added


def test_info_names_the_adapter_and_the_backend_behind_its_wrappers(tmp_path, sources):
    path, label = _adapter(tmp_path)
    settings = ServiceSettings(data_dir=tmp_path / "service")
    app = create_app(LimitedModel(ScriptedModel(["x"]), 1), sources, settings, model_config=ModelConfig(lora_path=path))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        info = client.get("/v1/info").json()
    assert info["adapter"] == label and info["backend"] == "ScriptedModel"
    app = create_app(LimitedModel(ScriptedModel(["x"]), 1), sources, ServiceSettings(data_dir=tmp_path / "s2"))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        info = client.get("/v1/info").json()
    assert info["adapter"] is None and info["backend"] == "ScriptedModel"  # not "LimitedModel"
