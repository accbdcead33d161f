"""Token streaming of one model call: the text a backend generates, piece by piece, as it decodes.

A caller that wants a call's text as it is generated wraps the call in :func:`tokens_to`; a backend
that can stream reads :func:`token_sink` while it generates and hands each new piece of text to it.
The sink lives in a context variable, so the wrappers between the caller and the backend (the
concurrency limit, the response cache, the conversation, the cancellation) need no change, and a
call made without a sink (every call but the ones a caller marks) streams nothing.

What a sink receives, joined, is a prefix of the call's ``ChatResponse.text``: a stop string never
reaches it (:class:`StopSafeText` holds back the characters that may still turn out to begin one).
A call that is not generated (a response served from the cache) or a backend that cannot stream
sends nothing, and the caller has the whole text when the call returns.

Backends that stream: ``llamacpp`` through xllamacpp (llama.cpp's server streaming, in process) or
llama-cpp-python and ``transformers`` (their own token loops), ``openai`` (the server's stream)
and the ``scripted`` test double (its canned text, one rough token at a time).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["StopSafeText", "TokenSink", "token_sink", "tokens_to"]

TokenSink = Callable[[str], None]

_SINK: ContextVar[TokenSink | None] = ContextVar("routerag_token_sink", default=None)


@contextmanager
def tokens_to(sink: TokenSink) -> Iterator[None]:
    """Model calls made inside this block (in this thread or task) stream their text to ``sink``."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)


def token_sink() -> TokenSink | None:
    """The sink of the model call running now, or None when nobody asked for its tokens."""
    return _SINK.get()


class StopSafeText:
    """Sends a growing generated text to ``sink`` without ever sending a stop string: of the text
    so far, the last ``longest stop - 1`` characters wait until more text shows they begin none
    (a stop found later starts after everything sent)."""

    def __init__(self, sink: TokenSink, stops: Sequence[str] = ()) -> None:
        self.sink = sink
        self.hold = max((len(s) for s in stops if s), default=1) - 1
        self.sent = 0

    def update(self, text: str) -> None:
        """``text``: everything generated so far, no stop string found in it yet."""
        self._send(text, len(text) - self.hold)

    def finish(self, text: str) -> None:
        """``text``: the call's final text (cut before the stop string that ended it)."""
        self._send(text, len(text))

    def _send(self, text: str, upto: int) -> None:
        if upto > self.sent:
            piece, self.sent = text[self.sent:upto], upto
            self.sink(piece)
