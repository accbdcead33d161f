"""ModelConfig resolution order and the backend factory."""

from __future__ import annotations

from pathlib import Path

import pytest

from routerag.api.environment import model_environment
from routerag.llm import BACKENDS, ChatModel, Message, ModelConfig, ModelError, build_model
from routerag.llm.cache import CachedModel
from routerag.llm.environment import ModelEnvironment
from routerag.llm.factory import model_identity
from routerag.registry import UnknownNameError


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("ROUTERAG_MODEL", "ROUTERAG_BASE_URL", "ROUTERAG_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ROUTERAG_HOME", str(tmp_path))


def test_defaults_to_bundled_llamacpp() -> None:
    cfg = ModelConfig().resolved()
    assert (cfg.backend, cfg.model, cfg.base_url) == ("llamacpp", "bundled:qwen2.5-coder-0.5b", None)
    assert cfg.concurrency == 1 and cfg.n_threads and cfg.n_threads >= 1


def test_environment_fills_what_is_not_explicit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERAG_MODEL", "Qwen/Qwen2.5-7B-Instruct")
    monkeypatch.setenv("ROUTERAG_BASE_URL", "http://127.0.0.1:8000/v1")
    environment = model_environment()
    cfg = ModelConfig().with_environment(environment).resolved()
    assert (cfg.backend, cfg.model, cfg.base_url, cfg.concurrency) == (
        "openai",
        "Qwen/Qwen2.5-7B-Instruct",
        "http://127.0.0.1:8000/v1",
        8,
    )
    explicit = ModelConfig(model="my.gguf", backend="llamacpp").with_environment(environment).resolved()
    assert (explicit.model, explicit.backend) == ("my.gguf", "llamacpp")


def test_bad_backend_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERAG_BACKEND", "telepathy")
    with pytest.raises(ValueError, match=r"telepathy.*\$ROUTERAG_BACKEND"):
        ModelConfig().with_environment(model_environment())
    assert ModelConfig(backend="scripted").with_environment(model_environment()).backend == "scripted"  # not used


def test_resolved_reads_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment is applied at the front door; a configuration not given it resolves to the defaults."""
    monkeypatch.setenv("ROUTERAG_MODEL", "Qwen/Qwen2.5-7B-Instruct")
    monkeypatch.setenv("ROUTERAG_BASE_URL", "http://127.0.0.1:8000/v1")
    monkeypatch.setenv("ROUTERAG_BACKEND", "telepathy")
    cfg = ModelConfig().resolved()
    assert (cfg.backend, cfg.model, cfg.base_url) == ("llamacpp", "bundled:qwen2.5-coder-0.5b", None)


def test_the_environment_is_a_value_read_from_a_mapping() -> None:
    assert ModelEnvironment.read({}) == ModelEnvironment()
    assert ModelEnvironment.read({"ROUTERAG_MODEL": "", "ROUTERAG_BASE_URL": "http://h/v1"}) == ModelEnvironment(
        base_url="http://h/v1")
    given = ModelEnvironment(model="m.gguf", base_url="http://h/v1", backend="llamacpp")
    assert ModelConfig().with_environment(given).resolved().backend == "llamacpp"  # the environment's backend wins
    assert ModelConfig(model="own.gguf").with_environment(given).model == "own.gguf"


def test_the_front_door_applies_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from routerag.api import resolve_strategy

    monkeypatch.setenv("ROUTERAG_MODEL", "elsewhere.gguf")
    resolved = resolve_strategy("routerag", {}, ModelConfig(), shipped_policy=True)
    assert resolved.model is not None and resolved.model.model == "elsewhere.gguf"
    assert resolved.model.lora_path is None  # no shipped policy for a model that is not a bundled base
    assert resolve_strategy("vanilla", {}, None, shipped_policy=True).model is None


def test_unknown_fields_are_rejected() -> None:
    with pytest.raises(ValueError):
        ModelConfig.model_validate({"backend": "llamacpp", "temprature": 0.3})


def test_build_scripted_with_cache(tmp_path: Path) -> None:
    model = build_model(ModelConfig(backend="scripted", scripted_outputs=["yes"], cache=tmp_path / "c.sqlite"))
    assert isinstance(model, ChatModel) and isinstance(model, CachedModel)
    q = [Message(role="user", content="?")]
    assert model.chat(q).text == "yes" and model.chat(q).cached
    assert model_identity(ModelConfig(backend="scripted").resolved()).startswith("scripted|")


def test_registry_lists_backends_and_rejects_unknown() -> None:
    assert BACKENDS.names() == ["llamacpp", "openai", "scripted", "transformers"]
    with pytest.raises(UnknownNameError, match="valid: llamacpp"):
        build_model(ModelConfig(backend="scripted", scripted_outputs=["x"]), backend="nope")


def test_missing_model_file_and_missing_base_url_are_clear() -> None:
    with pytest.raises(ModelError, match="neither a bundled"):
        build_model(ModelConfig(backend="llamacpp", model="/no/such/model.gguf"))
    with pytest.raises(ModelError, match="base_url"):
        build_model(ModelConfig(backend="openai", model="x"))
