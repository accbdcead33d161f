"""The chat-model protocol every backend implements, and its typed messages and usage."""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from routerag.errors import RouteragError


class Message(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: str


class GenerationParams(BaseModel):
    max_tokens: int = Field(default=256, ge=1, le=32_768)
    temperature: float = Field(default=0.0, ge=0.0, le=5.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    stop: list[str] = Field(default_factory=list)
    seed: int | None = 0
    grammar: str | None = None  # GBNF grammar (llama.cpp backends); ignored with a warning elsewhere


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ChatResponse(BaseModel):
    text: str  # the generated text, without the stop string that ended it
    usage: Usage
    latency_ms: float
    finish_reason: Literal["stop", "length", "eos"] = "stop"
    stop_string: str | None = None  # which of ``params.stop`` ended generation, if any
    model: str = ""
    cached: bool = False  # served from the response cache


class ModelError(RouteragError, RuntimeError):
    """A backend failed (server unreachable, model file missing, ...)."""


def check_conversation(messages: list[Message], continue_final: bool) -> None:
    """The checks every backend applies before it answers a conversation."""
    if not messages:
        raise ModelError("chat() needs at least one message")
    if continue_final and messages[-1].role != "assistant":
        raise ModelError("continue_final=True needs the last message to be the assistant's")


@runtime_checkable
class ChatModel(Protocol):
    """``chat`` answers a conversation. With ``continue_final=True`` the last message must be
    the assistant's, and the model continues it (multi-turn protocols such as RouteRAG append
    ``<information>`` to the assistant turn and let the model go on)."""

    name: str

    def chat(
        self,
        messages: list[Message],
        params: GenerationParams | None = None,
        *,
        continue_final: bool = False,
    ) -> ChatResponse: ...


class RenderedChatModel:
    """Mixin for backends that render the conversation with a chat template (``self.template``)
    and continue the raw prompt (``self.complete``): llama.cpp and transformers."""

    def render(self, messages: list[Message], *, continue_final: bool = False) -> str:
        return self.template.render(messages, continue_final=continue_final)  # type: ignore[attr-defined]

    def chat(
        self,
        messages: list[Message],
        params: GenerationParams | None = None,
        *,
        continue_final: bool = False,
    ) -> ChatResponse:
        return self.complete(self.render(messages, continue_final=continue_final), params)  # type: ignore[attr-defined]
