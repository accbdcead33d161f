"""Chat models: one protocol, several backends, usage accounting, response cache.

``build_model(ModelConfig(...))`` gives a ready model; backends live in their own modules
(``llamacpp``, ``openai_compat``, ``transformers_backend``, ``scripted``) and are imported lazily.
"""

from routerag.llm.base import ChatModel, ChatResponse, GenerationParams, Message, ModelError, Usage
from routerag.llm.config import ModelConfig
from routerag.llm.factory import BACKENDS, build_model

__all__ = [
    "BACKENDS",
    "ChatModel",
    "ChatResponse",
    "GenerationParams",
    "Message",
    "ModelConfig",
    "ModelError",
    "Usage",
    "build_model",
]
