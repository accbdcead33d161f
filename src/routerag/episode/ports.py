"""The policy port of the episode engine and its two adapters.

The engine (:mod:`routerag.episode.engine`) never talks to a model directly; it asks a
:class:`PolicyPort` to continue the assistant turn and to append text the environment inserts.
Two adapters:

* :class:`ChatPolicy` wraps a :class:`~routerag.llm.base.ChatModel` (evaluation, the server):
  one growing assistant turn continued with ``continue_final``; text the model wrote after the
  action of a turn is dropped from the context; evidence is shown whole;
* :class:`TokenPolicy` wraps a token-level ``generate`` and a :class:`TokenCodec` (training):
  completion ids, log-probs and the loss mask are appended here and nowhere else; every sampled
  token is kept (the loss must see exactly the sampled sequence) and observations may be cut to
  a token limit (:func:`cut_observation`).

A new policy (a generation server, a batched sampler) is one more class with these five members.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from routerag.llm.base import GenerationParams, Message
from routerag.protocol.graphrag_r1_tags import DOCUMENTS_CLOSE
from routerag.protocol.routerag_tags import INFORMATION_CLOSE
from routerag.runtime.base import StrategyContext
from routerag.runtime.loop import call_model, generated_text
from routerag.trace import ModelCall

EVIDENCE_CLOSE = (INFORMATION_CLOSE, DOCUMENTS_CLOSE)  # the closing tags of the protocols' evidence blocks

Generate = Callable[[list[int], list[str], int], tuple[list[int], list[float]]]
"""``generate(prompt_ids, stop_strings, max_new_tokens) -> (completion_ids, logprobs)``."""


@dataclass
class Turn:
    """One continuation of the assistant turn, as the policy produced it."""

    text: str  # everything generated, including the stop string that ended it
    body: str  # ``text`` without the stop string and what follows it
    stop: str | None  # the stop string that ended the turn; None when it ended otherwise (EOS, length)
    latency_ms: float
    calls: list[ModelCall] = field(default_factory=list)  # the accounting records (a chat call; none for tokens)
    ids: list[int] = field(default_factory=list)  # tokens: the sampled ids
    logprobs: list[float] = field(default_factory=list)  # tokens: their log-probs


class PolicyPort(Protocol):
    """What the engine needs from a policy."""

    @property
    def prompt_text(self) -> str:
        """The prompt as the policy sees it (the first ``prompt`` segment)."""
        ...

    def room(self) -> int | None:
        """Completion tokens left before the episode is cut; None when unlimited."""
        ...

    def size(self, text: str) -> int:
        """How much of :meth:`room` appending ``text`` would take."""
        ...

    def generate(self, stops: list[str], purpose: str) -> Turn:
        """Continue the assistant turn until one of ``stops`` (or the turn's length limit)."""
        ...

    def add_model(self, turn: Turn, keep: int) -> str:
        """Put the turn into the context; ``keep`` is where its action ends (text after it may be
        dropped). Returns the text that entered the context."""
        ...

    def add_observation(self, text: str, *, evidence: bool = False) -> str:
        """Append environment text (``evidence``: a search's rendered hits; else a repair or a
        cue); a port may cut evidence to its own limit. Returns the text that entered the context."""
        ...


# ---------------------------------------------------------------- chat


class ChatPolicy:
    """A :class:`ChatModel` continuing one growing assistant turn after fixed prompt messages;
    ``prefix`` (the rules' prompt-side start of the assistant turn) opens that turn. Observations
    are never cut (evaluation shows evidence whole)."""

    def __init__(self, ctx: StrategyContext, messages: list[Message], generation: GenerationParams, *, prefix: str = "") -> None:
        if not messages or messages[-1].role == "assistant":
            raise ValueError("a chat episode starts from prompt messages ending with a user/system turn")
        self.ctx = ctx
        self.messages = list(messages)
        self.generation = generation
        self.prefix = prefix
        self._assistant: list[str] = [prefix] if prefix else []

    @property
    def prompt_text(self) -> str:
        return "\n\n".join(m.content for m in self.messages) + self.prefix

    @property
    def assistant_text(self) -> str:
        return "".join(self._assistant)

    def room(self) -> int | None:
        return None

    def size(self, text: str) -> int:
        return 0

    def generate(self, stops: list[str], purpose: str) -> Turn:
        if self._assistant:
            messages, continue_final = [*self.messages, Message(role="assistant", content=self.assistant_text)], True
        else:
            messages, continue_final = list(self.messages), False
        params = self.generation.model_copy(update={"stop": stops})
        response, call = call_model(self.ctx, messages, params, purpose, continue_final=continue_final)
        return Turn(text=generated_text(response), body=response.text, stop=response.stop_string,
                    latency_ms=call.latency_ms, calls=[call])

    def add_model(self, turn: Turn, keep: int) -> str:
        text = turn.text[:keep]
        self._assistant.append(text)
        return text

    def add_observation(self, text: str, *, evidence: bool = False) -> str:
        self._assistant.append(text)
        return text


# ---------------------------------------------------------------- tokens


class TokenCodec(Protocol):
    """What the token adapter needs from a tokenizer."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def render_prompt(self, user_text: str) -> str: ...

    def render_messages(self, messages: Sequence[Message]) -> str: ...


def cut_observation(codec: TokenCodec, text: str, limit: int) -> list[int]:
    """At most ``limit`` token ids of an observation. An evidence block (RouteRAG's
    ``<information>``, GraphRAG-R1's ``<|begin_of_documents|>``) is cut inside its body and keeps
    its closing tag (and the whitespace after it), so a cut observation still looks like the ones
    the policy saw in SFT and sees in evaluation (which cuts none) — a block cut through its
    closing tag makes the policy go on writing the document instead of acting. Other text is cut
    at ``limit``."""
    ids = codec.encode(text)
    if len(ids) <= limit:
        return ids
    core = text.rstrip()
    for close in EVIDENCE_CLOSE:
        if core.endswith(close):
            suffix_ids = codec.encode(" ...\n" + close + text[len(core):])
            if len(suffix_ids) < limit:
                body_ids = codec.encode(core[: -len(close)])
                return body_ids[: limit - len(suffix_ids)] + suffix_ids
    return ids[:limit]


def _split_at_stop(text: str, stops: Sequence[str]) -> tuple[str, str | None]:
    """``text`` before the earliest of ``stops`` in it, and that stop (None when none occurs)."""
    best: tuple[int, str] | None = None
    for stop in stops:
        at = text.find(stop) if stop else -1
        if at >= 0 and (best is None or at < best[0]):
            best = (at, stop)
    return (text, None) if best is None else (text[: best[0]], best[1])


class TokenPolicy:
    """A token-level ``generate`` over prompt + completion ids: the one place where the completion
    ids, their log-probs and the loss mask (``env_mask``: 1 = the policy's own token, 0 = inserted
    by the environment) grow, always together. Evidence is cut to ``max_observation_tokens``
    (:func:`cut_observation`; None: uncut)."""

    def __init__(self, codec: TokenCodec, generate: Generate, prompt_text: str, *, max_new_tokens: int,
                 max_completion_tokens: int, max_observation_tokens: int | None = None) -> None:
        self.codec = codec
        self.max_observation_tokens = max_observation_tokens
        self._generate = generate
        self._prompt_text = prompt_text
        self.max_new_tokens = max_new_tokens
        self.max_completion_tokens = max_completion_tokens
        self.prompt_ids = codec.encode(prompt_text)
        self.completion: list[int] = []
        self.mask: list[int] = []
        self.logprobs: list[float] = []

    @property
    def prompt_text(self) -> str:
        return self._prompt_text

    def room(self) -> int | None:
        return self.max_completion_tokens - len(self.completion)

    def size(self, text: str) -> int:
        return len(self.codec.encode(text))

    def generate(self, stops: list[str], purpose: str) -> Turn:
        room = self.max_completion_tokens - len(self.completion)
        t0 = time.perf_counter()
        ids, logprobs = self._generate(self.prompt_ids + self.completion, list(stops), min(self.max_new_tokens, room))
        latency_ms = (time.perf_counter() - t0) * 1000.0
        if len(ids) != len(logprobs):
            raise ValueError(f"generate returned {len(ids)} ids but {len(logprobs)} logprobs")
        text = self.codec.decode(ids)
        body, stop = _split_at_stop(text, stops)
        return Turn(text=text, body=body, stop=stop, latency_ms=latency_ms, ids=list(ids),
                    logprobs=[float(x) for x in logprobs])

    def _append(self, ids: Sequence[int], logprobs: Sequence[float], own: int) -> None:
        self.completion += list(ids)
        self.logprobs += list(logprobs)
        self.mask += [own] * len(ids)

    def add_model(self, turn: Turn, keep: int) -> str:
        self._append(turn.ids, turn.logprobs, 1)  # every sampled token, even after the action
        return turn.text

    def add_observation(self, text: str, *, evidence: bool = False) -> str:
        ids = self.codec.encode(text)
        limit = self.max_observation_tokens if evidence else None
        if limit is not None and len(ids) > limit:
            ids = cut_observation(self.codec, text, limit)
            text = self.codec.decode(ids)
        self._append(ids, [0.0] * len(ids), 0)
        return text
