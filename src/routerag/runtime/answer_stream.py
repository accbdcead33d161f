"""The final answer's text while the model still writes it.

A caller that shows the answer as it is generated gives the strategy context an answer sink
(``StrategyContext.on_answer``). A strategy whose answer is one model call's text, shaped by a
pure function (``clean_answer``, ``str.strip``), makes that call with :func:`call_answer`: the
backend streams the call's text (:mod:`routerag.llm.streaming`), and :class:`AnswerDeltas` sends
the sink each piece of the *answer* as soon as no later text can change it (the strategy's
``settled`` function says how much that is). Joined, the pieces are a prefix of
``Trace.answer``; the caller adds what is left once the run ends (what a backend that does not
stream, or a cached reply, gives all at once).

Strategies whose answer comes out of a multi-turn episode (``routerag``'s ``<answer>`` tag) or is
chosen among several calls send nothing here: their answer is known when the run ends.
"""

from __future__ import annotations

from collections.abc import Callable

from routerag.llm.base import ChatResponse, GenerationParams, Message
from routerag.llm.streaming import tokens_to
from routerag.runtime.base import AnswerSink, StrategyContext
from routerag.runtime.loop import call_model
from routerag.trace import ModelCall

__all__ = ["AnswerDeltas", "Settled", "call_answer"]

Settled = Callable[[str], str]
"""A text still being generated -> the part of its shaped answer no continuation can change."""


class AnswerDeltas:
    """A token sink for the answer call: raw pieces of generated text in, pieces of the answer out."""

    def __init__(self, sink: AnswerSink, settled: Settled) -> None:
        self.sink = sink
        self.settled = settled
        self.raw = ""
        self.sent = ""
        self.stopped = False  # a settled prefix that did not extend the last one: nothing more is sent

    def __call__(self, piece: str) -> None:
        self.raw += piece
        if self.stopped:
            return
        now = self.settled(self.raw)
        if not now.startswith(self.sent):
            self.stopped = True
            return
        if len(now) > len(self.sent):
            delta, self.sent = now[len(self.sent):], now
            self.sink(delta)


def call_answer(ctx: StrategyContext, messages: list[Message], params: GenerationParams, settled: Settled,
                purpose: str = "answer") -> tuple[ChatResponse, ModelCall]:
    """:func:`~routerag.runtime.loop.call_model` for the call whose text, shaped, is the run's
    final answer: with an answer sink on the context, the answer streams to it as it is generated."""
    if ctx.on_answer is None:
        return call_model(ctx, messages, params, purpose)
    with tokens_to(AnswerDeltas(ctx.on_answer, settled)):
        return call_model(ctx, messages, params, purpose)
