"""A deterministic scripted chat model: the test double other packages' unit tests use.

It answers from a list of canned outputs (one per call, in order) or from a function of the
request, and otherwise behaves like a real backend: it cuts the text at the earliest stop
string and reports which one, truncates to ``max_tokens`` (``finish_reason="length"``), and
counts tokens roughly (words and punctuation marks), so usage accounting is exercised. A call made
under :func:`routerag.llm.streaming.tokens_to` streams its text one rough token at a time (each
with the whitespace before it), as a backend streams what it decodes.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from routerag.llm.base import ChatResponse, GenerationParams, Message, ModelError, Usage, check_conversation
from routerag.llm.config import ModelConfig
from routerag.llm.streaming import token_sink

_TOKEN = re.compile(r"\w+|[^\w\s]")


def rough_token_count(text: str) -> int:
    """Words and punctuation marks: a stable stand-in for a tokenizer."""
    return len(_TOKEN.findall(text))


def truncate_tokens(text: str, max_tokens: int) -> tuple[str, bool]:
    """Keep the first ``max_tokens`` rough tokens of ``text``; returns (text, was_truncated)."""
    matches = list(_TOKEN.finditer(text))
    if len(matches) <= max_tokens:
        return text, False
    return text[: matches[max_tokens - 1].end()], True


def cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, str | None]:
    """Cut ``text`` at the earliest occurrence of any stop string; ties go to the longer stop."""
    best: tuple[int, int, str] | None = None
    for stop in stops:
        if not stop:
            continue
        at = text.find(stop)
        if at >= 0 and (best is None or (at, -len(stop)) < (best[0], best[1])):
            best = (at, -len(stop), stop)
    if best is None:
        return text, None
    return text[: best[0]], best[2]


def token_pieces(text: str) -> list[str]:
    """``text`` cut after each rough token (the whitespace before a token goes with it); joined, the pieces are ``text``."""
    ends = [m.end() for m in _TOKEN.finditer(text)]
    if not ends or ends[-1] < len(text):
        ends.append(len(text))
    return [text[start:end] for start, end in zip([0, *ends], ends, strict=False) if end > start]


@dataclass(frozen=True)
class ScriptedCall:
    """One request the scripted model received (for assertions in tests)."""

    messages: list[Message]
    params: GenerationParams
    continue_final: bool


Responder = Callable[[list[Message], GenerationParams, bool], str]


@dataclass
class ScriptedModel:
    """``ScriptedModel(["first answer", "second answer"])`` or ``ScriptedModel(fn)`` where
    ``fn(messages, params, continue_final) -> str``. A list that runs out raises ``ModelError``
    unless ``cycle=True``. Thread-safe; ``calls`` records every request."""

    outputs: Sequence[str] | Responder
    name: str = "scripted"
    cycle: bool = False
    calls: list[ScriptedCall] = field(default_factory=list)
    _next: int = field(default=0, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _raw_output(self, messages: list[Message], params: GenerationParams, continue_final: bool) -> str:
        if callable(self.outputs):
            text = self.outputs(messages, params, continue_final)
            if not isinstance(text, str):
                raise ModelError(f"scripted responder returned {type(text).__name__}, expected str")
            return text
        with self._lock:
            if self._next >= len(self.outputs):
                if not self.cycle or not self.outputs:
                    raise ModelError(
                        f"ScriptedModel ran out of outputs after {self._next} call(s); give more outputs or cycle=True"
                    )
                self._next = 0
            text = self.outputs[self._next]
            self._next += 1
        return text

    def chat(
        self,
        messages: list[Message],
        params: GenerationParams | None = None,
        *,
        continue_final: bool = False,
    ) -> ChatResponse:
        params = params or GenerationParams()
        check_conversation(messages, continue_final)
        start = time.perf_counter()
        with self._lock:
            self.calls.append(ScriptedCall(list(messages), params, continue_final))
        raw = self._raw_output(list(messages), params, continue_final)
        text, truncated = truncate_tokens(raw, params.max_tokens)
        text, stop_string = cut_at_stop(text, params.stop)
        if stop_string is not None:
            finish = "stop"
        elif truncated:
            finish = "length"
        else:
            finish = "eos"
        sink = token_sink()
        if sink is not None:
            for piece in token_pieces(text):
                sink(piece)
        prompt_text = "\n".join(m.content for m in messages)
        usage = Usage(
            prompt_tokens=rough_token_count(prompt_text) + 4 * len(messages),
            completion_tokens=rough_token_count(text) + (0 if finish == "length" else 1),
        )
        return ChatResponse(
            text=text,
            usage=usage,
            latency_ms=(time.perf_counter() - start) * 1000.0,
            finish_reason=finish,
            stop_string=stop_string,
            model=self.name,
        )


def from_config(config: ModelConfig) -> ScriptedModel:
    """``backend: scripted`` with ``scripted_outputs`` (cycled), for demos and smoke tests."""
    if not config.scripted_outputs:
        raise ModelError("the scripted backend needs scripted_outputs in the model configuration")
    return ScriptedModel(list(config.scripted_outputs), name=config.model or "scripted", cycle=True)
