"""Chat models: one protocol, several backends, usage accounting, response cache."""

from routerag.llm.base import ChatModel, ChatResponse, GenerationParams, Message, ModelError, Usage

__all__ = ["ChatModel", "ChatResponse", "GenerationParams", "Message", "ModelError", "Usage"]
