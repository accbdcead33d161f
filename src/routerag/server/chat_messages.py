"""What the chat endpoint reads from an OpenAI ``messages`` list: the one rule, applied to every
model name (strategies and ``passthrough`` alike).

* **The question** is the text of the last ``user`` message.
* **System and developer messages** (before the question) are the instructions and the context
  the strategy answers from: their texts, joined by blank lines, are added to the system message
  of every model call of the run (:class:`~routerag.llm.conversation.ConversationModel`). The
  context LangChain's ``create_retrieval_chain`` puts in its system message is read this way.
* **Earlier turns** (``user`` and ``assistant`` messages before the question) are the
  conversation so far: every model call of the run sees them, as they were, after its system
  message.
* **Refused** (400, ``param: "messages"``), never dropped: a request without a user message;
  ``tool``/``function`` messages and assistant ``tool_calls`` (no strategy calls a client's
  tools); any message after the question (an assistant prefill, a tool result); a content part
  that is not ``text`` (an image) in any message.

A message's content is a string or a list of ``text`` parts (joined by newlines).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from routerag.errors import RouteragError
from routerag.llm.base import Message
from routerag.llm.conversation import Conversation

__all__ = ["AskedConversation", "ChatMessage", "ContentPart", "ConversationRefused", "message_text", "read_messages"]


class ConversationRefused(RouteragError, ValueError):
    """A ``messages`` list the chat endpoint does not answer (see the module notes); the message says which and why."""


class ContentPart(BaseModel):
    """One part of a message's content: ``{"type": "text", "text": ...}`` (other kinds are refused)."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(max_length=64)
    text: str | None = None


class ChatMessage(BaseModel):
    """A message as OpenAI clients send it; ``name`` and the like are accepted and not read."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None


class AskedConversation(BaseModel):
    """A ``messages`` list read by the rule: the question, where it is, and the conversation around it."""

    model_config = ConfigDict(frozen=True)

    index: int = Field(description="the position of the last user message")
    question: str
    conversation: Conversation


def message_text(message: ChatMessage, index: int) -> str:
    """A message's text: its string content, or its ``text`` parts joined by newlines."""
    content = message.content
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part in content:
        if part.type != "text":
            raise ConversationRefused(f"messages[{index}]: a content part of type {part.type!r} cannot be read: "
                                      "routerag answers text")
        texts.append(part.text or "")
    return "\n".join(texts)


def read_messages(messages: list[ChatMessage]) -> AskedConversation:
    """The question, the instructions and the earlier turns of ``messages`` (see the module notes);
    :class:`ConversationRefused` for a list the rule does not answer."""
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    if not users:
        raise ConversationRefused("no user message: the last user message is the question")
    last = users[-1]
    if last < len(messages) - 1:
        raise ConversationRefused(f"messages[{last + 1}] ({messages[last + 1].role}) follows the question: the last "
                                  "user message is the question and must be the last message")
    instructions: list[str] = []
    history: list[Message] = []
    for index, message in enumerate(messages[:last]):
        if message.role in ("tool", "function"):
            raise ConversationRefused(f"messages[{index}]: {message.role} messages are not supported: routerag's "
                                      "strategies call no client tools")
        if (message.model_extra or {}).get("tool_calls"):
            raise ConversationRefused(f"messages[{index}]: tool_calls are not supported: routerag's strategies call no "
                                      "client tools")
        text = message_text(message, index)
        if message.role in ("system", "developer"):
            instructions.append(text)
        else:
            history.append(Message(role="user" if message.role == "user" else "assistant", content=text))
    question = message_text(messages[last], last)
    conversation = Conversation(instructions="\n\n".join(t for t in instructions if t.strip()), history=tuple(history))
    return AskedConversation(index=last, question=question, conversation=conversation)
