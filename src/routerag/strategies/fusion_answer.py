"""Fusing the sub-answers into the final answer, with the last-hop answer as the fallback."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from routerag.jsontext import as_text, extract_json, partial_object
from routerag.llm.base import Message
from routerag.strategies.subanswer import SubAnswer


class Hop(BaseModel):
    """One executed sub-query: its id, the query after binding, and its final sub-answer."""

    id: str
    query: str
    answer: SubAnswer


class Fusion(BaseModel):
    answer: str
    reason: str = ""
    used_fallback: bool = False
    format_error: str | None = None


FUSE_SYSTEM = "You combine the answers of sub-questions into the answer of the main question."


def render_chain(hops: Sequence[Hop]) -> str:
    lines = []
    for hop in hops:
        status = "" if hop.answer.success else " (not confirmed by the passages)"
        lines.append(f"{hop.id}: {hop.query} -> {hop.answer.answer or '(no answer)'}{status}")
        if hop.answer.reason:
            lines.append(f"    reason: {hop.answer.reason}")
    return "\n".join(lines)


def fuse_messages(question: str, hops: Sequence[Hop]) -> list[Message]:
    user = (
        f"Question: {question}\n\nSub-questions and their answers:\n{render_chain(hops)}\n\n"
        'Reply with JSON only: {"answer": "<short final answer: entity, value or option text>", '
        '"reason": "<one sentence>"}'
    )
    return [Message(role="system", content=FUSE_SYSTEM), Message(role="user", content=user)]


def last_hop_answer(hops: Sequence[Hop]) -> str:
    """The last executed hop's answer; if that is empty, the latest non-empty one."""
    for hop in reversed(hops):
        if hop.answer.answer:
            return hop.answer.answer
    return ""


def parse_fusion(text: str, fallback: str) -> Fusion:
    value = extract_json(text, want=dict)
    error = None
    if value is None and (partial := partial_object(text)) and as_text(partial.get("answer")):
        value, error = partial, "fusion reply is broken JSON; fields recovered"
    if value is None:
        return Fusion(answer=fallback, used_fallback=True, format_error="fusion reply is not JSON; used the last-hop answer")
    answer = as_text(value.get("answer") or value.get("final_answer"))
    if not answer:
        return Fusion(answer=fallback, used_fallback=True, format_error="fusion answer is empty; used the last-hop answer")
    return Fusion(answer=answer, reason=as_text(value.get("reason")), format_error=error)
