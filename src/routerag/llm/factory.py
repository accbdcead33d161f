"""Build a chat model from a :class:`ModelConfig` through the backend registry
(:mod:`routerag.llm.backends`, re-exported here as ``BACKENDS``).

A plugin adds a backend with ``BACKENDS.register("name", factory)`` where
``factory(config: ModelConfig) -> ChatModel``; ``ModelConfig(backend="name")`` then accepts it (or
name the factory by its import path, ``backend: "pkg.mod:factory"``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from routerag.llm.backends import BACKENDS
from routerag.llm.base import ChatModel, ChatResponse, GenerationParams, Message
from routerag.llm.cache import CachedModel
from routerag.llm.concurrency import LimitedModel
from routerag.llm.config import ModelConfig
from routerag.paths import cache_dir
from routerag.process_local import ProcessLocal

BackendFactory = Callable[[ModelConfig], ChatModel]

__all__ = ["BACKENDS", "BackendFactory", "DeferredModel", "adapter_label", "build_model", "default_cache_path",
           "model_identity"]


def model_identity(config: ModelConfig) -> str:
    """What distinguishes one model's answers from another's, for the response cache and run
    fingerprints. A LoRA adapter adds its content hash and scale, a served model name (a LoRA module
    of a vLLM server) adds that name (nothing is added without them, so identities of older
    configurations are unchanged)."""
    identity = "|".join(str(part or "") for part in (config.backend, config.model, config.base_url, config.chat_format))
    if (adapter := config.adapter_file()) is not None:
        identity += f"|lora={_file_sha256(adapter)[:16]}@{config.lora_scale:g}"
    if config.served_model is not None:  # a served adapter (vLLM LoRA module) answers, not the base model
        identity += f"|served={config.served_model}"
    return identity


def adapter_label(config: ModelConfig | None) -> str | None:
    """The policy adapter a model configuration applies, for traces, runs and the service's
    ``/v1/info``: ``FILE@sha256:PREFIX`` for a LoRA file (``FILE@missing`` when it is gone), the
    served name for a vLLM LoRA module; None for a base model."""
    if config is None:
        return None
    if config.lora_path is not None:
        try:
            adapter = config.adapter_file()
            assert adapter is not None
            digest = f"sha256:{_file_sha256(adapter)[:12]}"
        except (ValueError, OSError):  # gone, or a shipped policy that cannot be unpacked
            adapter, digest = Path(str(config.lora_path)), "missing"
        return f"{adapter.name}@{digest}"
    if config.served_model is not None:
        return f"{config.served_model} (served)"
    return None


def _file_sha256(path: Path) -> str:
    from routerag.filehash import file_sha256

    return file_sha256(path, what="LoRA adapter")


def default_cache_path() -> Path:
    return cache_dir("llm") / "responses.sqlite"


def build_model(config: ModelConfig | None = None, *, backend: str | None = None) -> ChatModel:
    """The configured model, behind a concurrency limit and (if ``cache``) the response cache."""
    resolved = (config or ModelConfig()).resolved()
    factory = BACKENDS.get(backend or resolved.backend or "llamacpp")
    model: ChatModel = factory(resolved)
    if resolved.concurrency:
        model = LimitedModel(model, resolved.concurrency)
    if resolved.cache is not False:
        path = default_cache_path() if resolved.cache is True else Path(resolved.cache)
        model = CachedModel(model, path, identity=model_identity(resolved))
    return model


class DeferredModel(ProcessLocal[ModelConfig, ChatModel]):
    """A :class:`ChatModel` built by :func:`build_model` on its first ``chat`` in the process that
    calls it. It pickles as its configuration only (:class:`~routerag.process_local.ProcessLocal`),
    so a copy sent to another process (a Ray actor of ``routerag eval --engine ray``) builds its own
    model there, once."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        self.name = config.model or config.backend or "model"

    def _build(self) -> ChatModel:
        return build_model(self.config)

    def model(self) -> ChatModel:
        return self.value()

    def chat(self, messages: list[Message], params: GenerationParams | None = None, *, continue_final: bool = False) -> ChatResponse:
        return self.value().chat(messages, params, continue_final=continue_final)
