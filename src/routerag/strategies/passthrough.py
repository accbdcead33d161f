"""``passthrough``: no retrieval, no prompt of its own — the question is the user message of one
model call, answered by the model as it is (its chat template renders the conversation).

It is the model for a caller that brings its own context: on the chat endpoint a client's system
message and earlier turns come with the question (:class:`~routerag.llm.conversation.Conversation`),
so the call is exactly the client's messages — LangChain's ``create_retrieval_chain`` with its
retrieved documents in the system message, a LlamaIndex query engine, an agent's prompt. The
answer is the model's whole reply (stripped of surrounding whitespace), not a short answer cut
from its first line. The reply streams as it is generated (``StrategyContext.on_answer``).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field

from routerag.llm.base import Message
from routerag.runtime.answer_stream import call_answer
from routerag.runtime.loop import LoopStrategy, record_exchange
from routerag.strategies.baselines import DirectParams, finish_answer
from routerag.trace import Trace


class PassthroughParams(DirectParams):
    max_tokens: int = Field(default=512, ge=1, le=8192, description="tokens of the reply")


class Passthrough(LoopStrategy):
    name: ClassVar[str] = "passthrough"
    Params: ClassVar[type[BaseModel]] = PassthroughParams
    retrieves: ClassVar[bool] = False
    params: PassthroughParams

    def execute(self, trace: Trace) -> None:
        messages = [Message(role="user", content=trace.question)]
        response, call = call_answer(self.context, messages, self.params.generation(), str.strip)
        record_exchange(trace, messages, response.text)
        finish_answer(trace, response.text.strip(), response.text, call)
