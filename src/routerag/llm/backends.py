"""The model backend registry: ``name -> factory(config: ModelConfig) -> ChatModel``.

Built-ins are registered lazily (``"module:attr"``), so llama.cpp, openai and torch are imported
only when that backend is built. ``ModelConfig.backend`` accepts every registered name and a
plugin's ``"pkg.mod:factory"``: a plugin calls ``BACKENDS.register("name", factory)`` (or is named
by its import path) and needs no edit of routerag. This module is separate from
:mod:`routerag.llm.factory` so that the configuration can check names without importing it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from routerag.llm.base import ChatModel
from routerag.registry import Registry, callables_taking

BACKENDS: Registry[Callable[[Any], ChatModel]] = Registry("model backend", callables_taking("config: ModelConfig"))
BACKENDS.register("llamacpp", "routerag.llm.llamacpp:from_config")
BACKENDS.register("openai", "routerag.llm.openai_compat:from_config")
BACKENDS.register("transformers", "routerag.llm.transformers_backend:from_config")
BACKENDS.register("scripted", "routerag.llm.scripted:from_config")
