"""Answering one sub-query from its kept evidence as ``{answer, reason, success}``."""

from __future__ import annotations

import json

from pydantic import BaseModel

from routerag.jsontext import as_bool, as_text, extract_json, partial_object
from routerag.llm.base import Message
from routerag.trace import Hit


class SubAnswer(BaseModel):
    answer: str = ""
    reason: str = ""
    success: bool = False


ANSWER_SYSTEM = (
    "You answer a question using only the given passages. If they do not contain the answer, "
    "say so with success 0 instead of guessing."
)

MAIN_QUESTION_CHARS = 1500  # context for a sub-question; the full question reaches the fusion call

_NOT_FOUND = {"", "unknown", "none", "n/a", "not found", "no answer", "cannot be determined", "not mentioned"}


def render_evidence(hits: list[Hit], max_chars: int) -> str:
    """The numbered passages exactly as the answering prompt shows them."""
    if not hits:
        return "(no passages were retrieved)"
    blocks = []
    for number, hit in enumerate(hits, start=1):
        text = hit.text if len(hit.text) <= max_chars else hit.text[:max_chars] + " ..."
        title = f"{hit.title}\n" if hit.title else ""
        blocks.append(f"[{number}] (source: {hit.source}) {title}{text}")
    return "\n\n".join(blocks)


def answer_messages(query: str, evidence: str, main_question: str | None = None) -> list[Message]:
    parts = [f"Passages:\n{evidence}"]
    if main_question and main_question.strip() != query.strip():
        parts.append(f"(This question is one step towards answering: {main_question[:MAIN_QUESTION_CHARS]})")
    parts.append(f"Question: {query}")
    parts.append(
        'Reply with JSON only: {"answer": "<short answer, just the entity/value/option text>", '
        '"reason": "<one sentence citing the passage>", "success": 1 if the passages give the answer else 0}'
    )
    return [Message(role="system", content=ANSWER_SYSTEM), Message(role="user", content="\n\n".join(parts))]


def parse_subanswer(text: str) -> tuple[SubAnswer, str | None]:
    """The parsed answer and a format error (``None`` when the reply was valid JSON)."""
    value = extract_json(text, want=dict)
    if value is None and (partial := partial_object(text)) and "answer" in partial:
        # a reply cut short has usually lost "success" (the last field): unconfirmed, so reflect
        sub, _ = parse_subanswer(json.dumps({"success": 0, **partial}))
        return sub, "answer reply is broken JSON; fields recovered"
    if value is None:
        plain = text.strip().splitlines()[0].strip() if text.strip() else ""
        short = plain if 0 < len(plain) <= 200 else ""
        return SubAnswer(answer=short, reason="unparsed reply", success=False), "answer reply is not JSON"
    answer = as_text(value.get("answer"))
    reason = as_text(value.get("reason") or value.get("explanation"))
    if "success" in value:
        success = as_bool(value.get("success"))
    else:
        success = answer.lower() not in _NOT_FOUND
    if answer.lower() in _NOT_FOUND:
        success = False
    return SubAnswer(answer=answer, reason=reason, success=success), None
