"""A streamed OpenAI-compatible reply read back into one: the openai backend asks the server to
stream a call whose tokens a caller wants (:func:`routerag.llm.streaming.tokens_to`), hands each
text delta to the sink as it arrives and builds from the chunks what a plain reply would have
held — the text, the finishing choice (its ``finish_reason`` and the extra fields that say which
stop ended the text) and the usage (asked for with ``stream_options.include_usage``; a server
that sends none leaves the counts at 0)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from routerag.llm.streaming import TokenSink

__all__ = ["StreamedReply", "read_stream", "stream_kwargs"]


@dataclass(frozen=True)
class StreamedReply:
    text: str
    choice: Any  # the chunk choice that carried finish_reason (None when the stream ended without one)
    usage: Any


def stream_kwargs() -> dict[str, Any]:
    """What a request adds to be streamed with its usage at the end."""
    return {"stream": True, "stream_options": {"include_usage": True}}


def read_stream(chunks: Iterable[Any], sink: TokenSink, kind: Literal["completions", "chat"]) -> StreamedReply:
    """Read a ``/completions`` (``kind="completions"``: ``choice.text``) or ``/chat/completions``
    (``choice.delta.content``) stream, sending each text delta to ``sink``."""
    pieces: list[str] = []
    finishing: Any = None
    usage: Any = None
    for chunk in chunks:
        if getattr(chunk, "usage", None) is not None:
            usage = chunk.usage
        for choice in chunk.choices or []:
            piece = choice.text if kind == "completions" else getattr(choice.delta, "content", None)
            if piece:
                pieces.append(piece)
                sink(piece)
            if choice.finish_reason is not None:
                finishing = choice
    return StreamedReply(text="".join(pieces), choice=finishing, usage=usage)
