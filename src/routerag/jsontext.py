"""Pull one JSON value out of a small model's text.

Small models wrap JSON in code fences, prefix it with prose or ``<think>`` blocks, use single
quotes, Python literals or trailing commas. :func:`extract_json` tolerates all of these and
returns ``None`` when no JSON value can be recovered (the caller records a format error). Shared
by the strategies' JSON replies and the LLM OpenIE extractor."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)
FENCE = re.compile(r"```(?:json|JSON|python)?\s*(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def loads_lenient(text: str) -> Any:
    """Strict JSON, then JSON without trailing commas, then a Python literal; raises ValueError."""
    for candidate in (text, _TRAILING_COMMA.sub(r"\1", text)):
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError) as exc:
        raise ValueError(str(exc)) from None


def _balanced(text: str, start: int) -> str | None:
    """The bracketed span opening at ``text[start]`` (quotes respected), or ``None`` if unclosed."""
    pairs = {"{": "}", "[": "]"}
    stack: list[str] = []
    quote: str | None = None
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in pairs:
            stack.append(pairs[ch])
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return None
            if not stack:
                return text[start : i + 1]
    return None


def extract_json(text: str, *, want: type | tuple[type, ...] = (dict, list)) -> Any | None:
    """The first JSON value of type ``want`` found in ``text``; ``None`` if there is none."""
    cleaned = _THINK.sub("", text).strip()
    candidates = [m.group(1).strip() for m in FENCE.finditer(cleaned)] + [cleaned]
    for block in candidates:
        try:
            value = loads_lenient(block)
            if isinstance(value, want):
                return value
        except ValueError:
            pass
        for start, ch in enumerate(block):
            if ch not in "{[":
                continue
            span = _balanced(block, start)
            if span is None:
                continue
            try:
                value = loads_lenient(span)
            except ValueError:
                continue
            if isinstance(value, want):
                return value
    return None


_FIELD = re.compile(r'["\']([A-Za-z_]+)["\']\s*:\s*(?:"((?:[^"\\]|\\.)*)"?|\'([^\']*)\'?|(-?\d+(?:\.\d+)?|true|false|True|False))')


def partial_object(text: str) -> dict[str, Any] | None:
    """Flat ``"key": value`` pairs from a JSON object cut short (generation limit) or otherwise
    broken; ``None`` when there are none. A string value cut off mid-way is kept as far as it goes."""
    fields: dict[str, Any] = {}
    for match in _FIELD.finditer(_THINK.sub("", text)):
        key, dq, sq, literal = match.groups()
        if key in fields:
            continue
        if literal is not None:
            fields[key] = json.loads(literal.lower()) if literal.lower() in ("true", "false") else float(literal)
        else:
            raw = dq if dq is not None else sq
            try:
                fields[key] = json.loads(f'"{raw}"')
            except json.JSONDecodeError:
                fields[key] = raw
    return fields or None


def as_bool(value: Any) -> bool:
    """``1``/``true``/``"yes"``/``"1"`` -> True; everything else False."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value > 0
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "y", "success", "found"}
    return False


def as_text(value: Any) -> str:
    """A model field rendered as a stripped string (lists joined with ``, ``)."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(as_text(v) for v in value if as_text(v))
    return str(value).strip()
