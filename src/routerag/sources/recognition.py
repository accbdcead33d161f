"""HippoRAG 2's recognition-memory filter: a chat model keeps only the candidate facts that bear
on the question. Facts the model invents are ignored; unparseable output keeps every candidate
(fail open) and says so in ``FilterResult.error``."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel

from routerag.index.openie.base import Triple, normalise_phrase
from routerag.index.openie.llm_extractor import parse_json_payload
from routerag.llm.base import ChatModel, GenerationParams, Message, ModelError
from routerag.trace import ModelCall

FILTER_SYSTEM = (
    "You filter facts for a multi-hop question-answering system. Given a question and candidate "
    "facts (subject, predicate, object), keep at most {max_keep} facts that help answer the question, "
    "possibly through several reasoning steps. Use only facts from the candidate list; never write new "
    'ones. Answer with JSON only: {{"fact": [["s", "p", "o"], ...]}}; if none helps, {{"fact": []}}.'
)
_EXAMPLE_Q = "Who directed the film that won the 1998 Golden Lion?"
_EXAMPLE_FACTS = [
    ["the way we laughed", "won", "1998 golden lion"],
    ["the way we laughed", "directed by", "gianni amelio"],
    ["golden lion", "awarded at", "venice film festival"],
    ["gianni amelio", "born in", "1945"],
]
_EXAMPLE_KEPT = _EXAMPLE_FACTS[:2]


class FilterResult(BaseModel):
    kept: list[int]  # indices into the candidate list, in candidate order
    call: ModelCall | None = None
    error: str | None = None


def filter_messages(question: str, facts: Sequence[Triple], max_keep: int) -> list[Message]:
    def user(q: str, fs: Sequence[Sequence[str]]) -> str:
        return f"Question: {q}\nCandidate facts: {json.dumps({'fact': [list(f) for f in fs]}, ensure_ascii=False)}"

    return [
        Message(role="system", content=FILTER_SYSTEM.format(max_keep=max_keep)),
        Message(role="user", content=user(_EXAMPLE_Q, _EXAMPLE_FACTS)),
        Message(role="assistant", content=json.dumps({"fact": _EXAMPLE_KEPT})),
        Message(role="user", content=user(question, facts)),
    ]


class FactRecognizer:
    def __init__(self, model: ChatModel, params: GenerationParams | None = None, max_keep: int = 4) -> None:
        self.model = model
        self.params = params or GenerationParams(max_tokens=384, temperature=0.0)
        self.max_keep = max_keep

    def __call__(self, question: str, facts: Sequence[Triple]) -> FilterResult:
        if not facts:
            return FilterResult(kept=[])
        everything = list(range(len(facts)))
        try:
            response = self.model.chat(filter_messages(question, facts, self.max_keep), self.params)
        except ModelError as exc:
            return FilterResult(kept=everything, error=f"model failed: {exc}")
        call = ModelCall(
            purpose="recognition_filter",
            prompt_tokens=response.usage.prompt_tokens,
            completion_tokens=response.usage.completion_tokens,
            latency_ms=response.latency_ms,
            cached=response.cached,
        )
        try:
            chosen = parse_json_payload(response.text, "fact")
            if not isinstance(chosen, list):
                raise ValueError("fact is not a list")
        except ValueError as exc:
            return FilterResult(kept=everything, call=call, error=str(exc))
        keys = {tuple(normalise_phrase(p) for p in f): i for i, f in enumerate(facts)}
        kept: set[int] = set()
        for item in chosen:
            if isinstance(item, (list, tuple)) and len(item) == 3 and all(isinstance(p, str) for p in item):
                i = keys.get(tuple(normalise_phrase(p) for p in item))
                if i is not None:
                    kept.add(i)
        return FilterResult(kept=sorted(kept)[: self.max_keep], call=call)
