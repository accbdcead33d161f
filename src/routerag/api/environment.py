"""The operator's model environment, read at the front door.

``ROUTERAG_MODEL``, ``ROUTERAG_BASE_URL`` and ``ROUTERAG_BACKEND``
(:class:`~routerag.llm.environment.ModelEnvironment`) are read here and nowhere below: each front
door function that takes a model configuration (``open_asker``/``ask``, ``evaluate``,
``ask_app``/``serve``, ``resolve_strategy``; the MCP server when it starts) applies them to it once,
filling only what the configuration leaves unset, before anything resolves it."""

from __future__ import annotations

import os

from routerag.llm.environment import ModelEnvironment


def model_environment() -> ModelEnvironment:
    """The model environment of this process, as it is set now."""
    return ModelEnvironment.read(os.environ)
