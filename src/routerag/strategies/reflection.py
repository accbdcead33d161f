"""Reflection after a failed sub-answer: the model sees what was tried (queries, sources,
answers and why they failed) and rewrites the query and/or switches source for the next attempt."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from routerag.jsontext import as_text, extract_json, partial_object
from routerag.llm.base import Message
from routerag.routing.source_routing import ROUTE_QUERY_CHARS, match_source, render_profiles
from routerag.strategies.subanswer import SubAnswer


class Attempt(BaseModel):
    """One try at a sub-query: what was asked, where, and what came back."""

    query: str
    source: str  # the chosen (hard-route) or preferred (RealRoute) source
    answer: SubAnswer


class Reflection(BaseModel):
    query: str
    source: str
    reason: str = ""
    format_error: str | None = None


HISTORY_QUERY_CHARS = 300

REFLECT_SYSTEM = (
    "A retrieval attempt failed to answer a question. Decide how to retry: rephrase the query so "
    "a search engine finds the answer, and/or switch to another knowledge source."
)


def render_history(attempts: Sequence[Attempt]) -> str:
    """The failure history shown to the model (also used in routing prompts)."""
    if not attempts:
        return ""
    lines = ["Failed attempts so far:"]
    for n, attempt in enumerate(attempts, start=1):
        got = attempt.answer.answer or "(no answer)"
        why = attempt.answer.reason or "no reason given"
        query = attempt.query if len(attempt.query) <= HISTORY_QUERY_CHARS else attempt.query[:HISTORY_QUERY_CHARS] + " ..."
        lines.append(f'{n}. query "{query}" on source "{attempt.source}" -> {got} (failed: {why})')
    return "\n".join(lines)


def reflect_messages(query: str, attempts: Sequence[Attempt], profiles: Mapping[str, str]) -> list[Message]:
    names = ", ".join(f'"{n}"' for n in profiles)
    user = (
        f"Sources:\n{render_profiles(profiles)}\n\nQuestion: {query[:ROUTE_QUERY_CHARS]}\n\n{render_history(attempts)}\n\n"
        "Prefer a source that has not failed yet unless the query itself was the problem.\n"
        f'Reply with JSON only: {{"query": "<rewritten query>", "source": one of {names}, "reason": "<one sentence>"}}'
    )
    return [Message(role="system", content=REFLECT_SYSTEM), Message(role="user", content=user)]


def parse_reflection(text: str, attempts: Sequence[Attempt], names: Sequence[str]) -> Reflection:
    """Unusable parts fall back: the last query, and the first source not tried yet."""
    if not attempts:
        raise ValueError("reflection needs at least one failed attempt")
    last = attempts[-1]
    tried = [a.source for a in attempts]
    untried = next((n for n in names if n not in tried), last.source)
    value = extract_json(text, want=dict)
    problems = []
    if value is None and (value := partial_object(text)) is not None:
        problems.append("broken JSON")
    if value is None:
        return Reflection(
            query=last.query, source=untried, reason="fallback", format_error="reflection reply is not JSON"
        )
    query = as_text(value.get("query") or value.get("rewritten_query"))
    if not query:
        problems.append("no query")
        query = last.query
    raw_source = as_text(value.get("source"))
    source = match_source(raw_source, names) if raw_source else None
    if source is None:
        problems.append(f"unknown source {raw_source!r}")
        source = untried
    error = f"reflection reply: {', '.join(problems)}; recovered" if problems else None
    return Reflection(query=query, source=source, reason=as_text(value.get("reason")), format_error=error)
