"""``ModelPool``: the chat models a long-running service answers with, one per model
configuration. It starts with the model the service was started with; another configuration (the
shipped policy adapter the front door applies to the ``routerag`` strategy) is built on its first
request and kept. Each model keeps its backend's own concurrency."""

from __future__ import annotations

import threading

from routerag.llm.base import ChatModel
from routerag.llm.config import ModelConfig


class ModelPool:
    """Models by configuration (keyed by ``model_identity``); thread-safe, each built once."""

    def __init__(self, config: ModelConfig, model: ChatModel) -> None:
        self.config = config
        self.base = model
        self._models: dict[str, ChatModel] = {self._key(config): model}
        self._lock = threading.Lock()

    @staticmethod
    def _key(config: ModelConfig) -> str:
        from routerag.llm.factory import model_identity

        return model_identity(config.resolved())

    def get(self, config: ModelConfig | None) -> ChatModel:
        """The model for ``config`` (the base model for None), built on first use."""
        if config is None:
            return self.base
        key = self._key(config)
        with self._lock:
            model = self._models.get(key)
            if model is None:
                from routerag.llm import factory  # looked up at call time

                model = self._models[key] = factory.build_model(config)
            return model
