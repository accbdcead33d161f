"""The replies of the OpenAI-compatible chat endpoint, in OpenAI's shape: a ``chat.completion``
and the ``chat.completion.chunk`` events of a streamed one (:mod:`routerag.server.chat_stream`).

A chunk's ``delta`` carries one of: the assistant ``role`` (the first chunk), ``reasoning_content``
(a line per step of the run, as servers that stream a model's reasoning send it) or ``content``
(the answer's text); fields it does not carry are left out, as OpenAI leaves them out.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from routerag.trace import Trace

__all__ = ["AssistantMessage", "ChatCompletion", "ChatCompletionChunk", "Choice", "ChunkChoice", "Delta", "CompletionUsage"]


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: Literal["stop"] = "stop"
    logprobs: None = None


class CompletionUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int

    @classmethod
    def of(cls, trace: Trace) -> CompletionUsage:
        return cls(prompt_tokens=trace.prompt_tokens, completion_tokens=trace.completion_tokens,
                   total_tokens=trace.prompt_tokens + trace.completion_tokens)


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: CompletionUsage
    routerag: Trace = Field(description="the run's full trace")


class Delta(BaseModel):
    """What one chunk adds to the assistant message; unset fields are not sent."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = Field(None, description="one line per step of the run, as it happens")

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {key: value for key, value in handler(self).items() if value is not None}


class ChunkChoice(BaseModel):
    index: int = 0
    delta: Delta
    finish_reason: Literal["stop"] | None = None
    logprobs: None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: CompletionUsage | None = None
    routerag: Trace | None = Field(None, description="the run's full trace: on the finishing chunk only")
