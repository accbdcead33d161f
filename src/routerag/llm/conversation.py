"""A caller's conversation around a strategy's own prompts.

A strategy builds its messages from the question alone. A caller that has more — instructions
and context (an OpenAI client's system message, such as the retrieved documents of LangChain's
``create_retrieval_chain``) and the conversation so far (earlier user and assistant turns) —
gives them as a :class:`Conversation`, and the run's model is wrapped in a
:class:`ConversationModel`, so that *every* model call of the run sees them, in every strategy,
without a strategy knowing:

* the caller's instructions are added to the strategy's system message, under
  :data:`INSTRUCTIONS_HEADING` (a strategy without a system message gets the instructions as its
  system message, as they were given: the ``passthrough`` strategy's call is then exactly the
  caller's conversation);
* the earlier turns follow the system message as they were, before the strategy's own messages.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from routerag.llm.base import ChatModel, ChatResponse, GenerationParams, Message

__all__ = ["INSTRUCTIONS_HEADING", "Conversation", "ConversationModel"]

INSTRUCTIONS_HEADING = "Instructions and context from the user (follow them; answer from this context when it holds the answer):"


class Conversation(BaseModel):
    """What a caller gives besides the question: ``instructions`` (with the context to answer
    from) and ``history``, the earlier turns (user and assistant messages, oldest first)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instructions: str = Field("", description="the caller's instructions and context")
    history: tuple[Message, ...] = Field((), description="the earlier user and assistant turns, oldest first")

    @property
    def empty(self) -> bool:
        return not self.instructions.strip() and not self.history

    def around(self, messages: list[Message]) -> list[Message]:
        """A strategy's ``messages`` with the instructions in its system message and the earlier
        turns after it (unchanged when the conversation is empty)."""
        if self.empty:
            return list(messages)
        head, rest = (messages[0], messages[1:]) if messages and messages[0].role == "system" else (None, messages)
        system: list[Message] = []
        if head is not None and self.instructions.strip():
            system = [Message(role="system", content=f"{head.content}\n\n{INSTRUCTIONS_HEADING}\n{self.instructions}")]
        elif head is not None:
            system = [head]
        elif self.instructions.strip():
            system = [Message(role="system", content=self.instructions)]
        return [*system, *self.history, *rest]


class ConversationModel:
    """A ``ChatModel`` whose every call is ``conversation.around`` the strategy's messages."""

    def __init__(self, inner: ChatModel, conversation: Conversation) -> None:
        self.inner = inner
        self.name = inner.name
        self.conversation = conversation

    def chat(self, messages: list[Message], params: GenerationParams | None = None, *,
             continue_final: bool = False) -> ChatResponse:
        return self.inner.chat(self.conversation.around(messages), params, continue_final=continue_final)
