"""Question decomposition into dependent sub-queries, their execution order, and variable binding.

The model writes a JSON plan::

    [{"id": "q1", "query": "Who directed Inception?"},
     {"id": "q2", "query": "When was {q1} born?", "depends_on": ["q1"]}]

A later sub-query names an earlier answer with a placeholder: ``{q1}``, ``{{q1}}``, ``[q1]``,
``#1`` (the first sub-query) or a named variable ``{director}`` declared as
``"variables": {"director": "q1"}`` (DeepSieve's ``[{"name", "source_query"}]`` list is accepted
too). Placeholders imply dependencies even when ``depends_on`` omits them. Output a small model
gets wrong falls back to one sub-query, the question itself, and the error is recorded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from routerag.jsontext import as_text, extract_json
from routerag.llm.base import Message


class SubQuery(BaseModel):
    id: str
    query: str
    depends_on: list[str] = Field(default_factory=list)
    variables: dict[str, str] = Field(default_factory=dict)  # placeholder name -> sub-query id


class Plan(BaseModel):
    subqueries: list[SubQuery]
    format_error: str | None = None  # what was wrong with the model's plan and how it was repaired

    @classmethod
    def single(cls, question: str, format_error: str | None = None) -> "Plan":
        return cls(subqueries=[SubQuery(id="q1", query=question)], format_error=format_error)


DECOMPOSE_SYSTEM = (
    "You split a question into the smallest sequence of simple sub-questions that answers it. "
    "A sub-question that needs an earlier answer refers to it with a placeholder such as {q1}. "
    "A question that is already simple stays one sub-question, copied unchanged."
)

DECOMPOSE_TEMPLATE = """Reply with a JSON list only, at most {max_subqueries} items, each {{"id": "q<n>", "query": "...", "depends_on": [ids it needs]}}.
The form of a two-step plan (for "When was the director of <film> born?"):
[{{"id": "q1", "query": "Who directed <film>?", "depends_on": []}},
 {{"id": "q2", "query": "When was {{q1}} born?", "depends_on": ["q1"]}}]

Question: {question}"""

_WORD = re.compile(r"[a-z0-9]{4,}")
# the example's stand-ins ("<film>"): a sub-query with one that the question lacks copied the example
# (law-med's CaseHOLD questions carry their own "<HOLDING>", so "the question has one" is not enough)
_STAND_IN = re.compile(r"<[a-z][a-z ]{0,20}>", re.IGNORECASE)


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def decompose_messages(question: str, max_subqueries: int) -> list[Message]:
    return [
        Message(role="system", content=DECOMPOSE_SYSTEM),
        Message(role="user", content=DECOMPOSE_TEMPLATE.format(question=question, max_subqueries=max_subqueries)),
    ]


# ---------------------------------------------------------------- parsing

_PLAN_KEYS = ("subqueries", "sub_queries", "subquestions", "sub_questions", "questions", "steps", "plan")
_QUERY_KEYS = ("query", "question", "subquery", "sub_question", "subquestion", "text")


def _plan_items(value: Any) -> list[Any] | None:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for key in _PLAN_KEYS:
            if isinstance(value.get(key), list):
                return value[key]
        lists = [v for v in value.values() if isinstance(v, list)]
        if len(lists) == 1:
            return lists[0]
        if any(isinstance(value.get(k), str) for k in _QUERY_KEYS):
            return [value]
    return None


def _variables(raw: Any) -> dict[str, str]:
    if isinstance(raw, Mapping):
        return {str(k): as_text(v) for k, v in raw.items() if as_text(v)}
    out: dict[str, str] = {}
    if isinstance(raw, list):
        for item in raw:
            if isinstance(item, Mapping):
                name = as_text(item.get("name"))
                source = as_text(item.get("source_query") or item.get("source") or item.get("from"))
                if name and source:
                    out[name] = source
    return out


def _depends(raw: Any) -> list[str]:
    if isinstance(raw, (str, int)):
        raw = [raw]
    if not isinstance(raw, list):
        return []
    return [as_text(d) for d in raw if as_text(d)]


def parse_plan(text: str, question: str, max_subqueries: int) -> Plan:
    """Turn the model's text into a :class:`Plan`; anything unusable gives the one-step plan."""
    items = _plan_items(extract_json(text))
    if not items:
        return Plan.single(question, "decomposition is not a JSON list of sub-queries; using the question")
    subqueries: list[SubQuery] = []
    problems: list[str] = []
    seen: set[str] = set()
    for position, item in enumerate(items, start=1):
        if isinstance(item, str):
            item = {"query": item}
        if not isinstance(item, Mapping):
            problems.append(f"item {position} is not an object")
            continue
        query = next((as_text(item[k]) for k in _QUERY_KEYS if as_text(item.get(k))), "")
        if not query:
            problems.append(f"item {position} has no query")
            continue
        sid = as_text(item.get("id")) or f"q{position}"
        if sid in seen:
            problems.append(f"id {sid!r} repeats; renamed")
            sid = f"q{position}"
            while sid in seen:
                sid += "_"
        seen.add(sid)
        subqueries.append(
            SubQuery(
                id=sid,
                query=query,
                depends_on=_depends(item.get("depends_on", item.get("dependencies"))),
                variables=_variables(item.get("variables")),
            )
        )
    if not subqueries:
        return Plan.single(question, "; ".join(problems) or "empty decomposition; using the question")
    lowered = question.lower()
    copied = [s for s in subqueries if any(m.lower() not in lowered for m in _STAND_IN.findall(s.query))]
    if copied:
        # "Who directed <film>?" is the prompt's example: the untrained 0.5B copied it into a fifth
        # of its law-med plans; the plan's other steps bind to it, so the whole plan is unusable
        return Plan.single(question, f"sub-query {copied[0].id} copies the prompt's example ({copied[0].query!r}); using the question")
    if not _words(" ".join(s.query for s in subqueries)) & _words(question):
        # small models copy the prompt's example; a plan sharing no word with the question is not one
        return Plan.single(question, "the sub-queries share no word with the question; using the question")
    if len(subqueries) > max_subqueries:
        problems.append(f"{len(subqueries)} sub-queries; kept the first {max_subqueries}")
        subqueries = subqueries[:max_subqueries]
    subqueries = _with_implicit_dependencies(subqueries)
    return Plan(subqueries=subqueries, format_error="; ".join(problems) or None)


# ---------------------------------------------------------------- placeholders and binding

# {q1} / {{q1}} / {#1} / [q1] / #1
_PLACEHOLDER = re.compile(r"\{\{?\s*(#?[\w-]+)\s*\}?\}|\[\s*([\w-]+)\s*\]|#(\d+)\b")


def _resolve(token: str, subquery: SubQuery, ids: list[str]) -> str | None:
    """The sub-query id a placeholder token names, or ``None``."""
    token = token.lstrip("#")
    if token in subquery.variables and subquery.variables[token] in ids:
        return subquery.variables[token]
    if token in ids:
        return token
    if token.isdigit() and 1 <= int(token) <= len(ids):
        return ids[int(token) - 1]
    if token.lower() in (i.lower() for i in ids):
        return next(i for i in ids if i.lower() == token.lower())
    return None


def referenced_ids(subquery: SubQuery, ids: list[str]) -> list[str]:
    out: list[str] = []
    for match in _PLACEHOLDER.finditer(subquery.query):
        token = next(g for g in match.groups() if g is not None)
        target = _resolve(token, subquery, ids)
        if target is not None and target != subquery.id and target not in out:
            out.append(target)
    return out


def _with_implicit_dependencies(subqueries: list[SubQuery]) -> list[SubQuery]:
    ids = [s.id for s in subqueries]
    out = []
    for sq in subqueries:
        deps = list(sq.depends_on)
        for ref in referenced_ids(sq, ids):
            if ref not in deps:
                deps.append(ref)
        out.append(sq.model_copy(update={"depends_on": deps}))
    return out


def execution_order(subqueries: list[SubQuery]) -> tuple[list[SubQuery], str | None]:
    """Topological order, stable in plan order. Unknown or self dependencies are dropped and a
    cycle is broken by plan order; either returns a note saying so."""
    ids = [s.id for s in subqueries]
    notes: list[str] = []
    deps: dict[str, set[str]] = {}
    for sq in subqueries:
        valid = {d for d in sq.depends_on if d in ids and d != sq.id}
        unknown = [d for d in sq.depends_on if d not in ids]
        if unknown:
            notes.append(f"{sq.id} depends on unknown {', '.join(unknown)}")
        deps[sq.id] = valid
    done: set[str] = set()
    order: list[SubQuery] = []
    remaining = list(subqueries)
    while remaining:
        ready = next((sq for sq in remaining if deps[sq.id] <= done), None)
        if ready is None:  # a cycle: run the earliest remaining one
            ready = remaining[0]
            notes.append(f"dependency cycle through {ready.id}; ran in plan order")
        order.append(ready)
        done.add(ready.id)
        remaining.remove(ready)
    return order, "; ".join(notes) or None


def bind(subquery: SubQuery, values: Mapping[str, str], ids: list[str]) -> str:
    """Substitute the bound values of earlier sub-queries into ``subquery.query``. Placeholders that
    name no known sub-query, or one without a value, are left as written."""

    def _sub(match: re.Match[str]) -> str:
        token = next(g for g in match.groups() if g is not None)
        target = _resolve(token, subquery, ids)
        if target is None or target == subquery.id or not values.get(target):
            return match.group(0)
        return values[target]

    return _PLACEHOLDER.sub(_sub, subquery.query)
