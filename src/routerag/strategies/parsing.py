"""Parsing a policy's output into typed actions, with a defined recovery for every protocol error.

Pure functions, no model and no sources: the strategies and the training rollout share them.
A protocol is a set of tags (:class:`TagProtocol`); Search-R1/RouteRAG use ``<search>`` /
``<answer>``, GraphRAG-R1 (after R1-Searcher) ``<|begin_of_query|>`` / ``<answer>``.

Error codes (each has a recovery; ``docs/strategies.md`` lists them):

``unclosed_search``   ``<search> q`` without ``</search>`` (EOS, length) -> a search for ``q``
``unclosed_answer``   ``<answer> x`` without ``</answer>`` -> the answer ``x``
``multiple_actions``  two actions in one output -> the first one opened wins, the rest is dropped
``empty_query``       ``<search></search>`` -> the question itself is searched
``trivial_query``     only function words (``<search> and </search>`` in prose) -> the question
``copied_instruction`` a copy of the prompt's placeholder (when the strategy passes them) -> the question
``long_query``        a query over the limit -> cut at a word boundary
``missing_mode``      no ``[mode]`` tag -> the default mode
``unknown_mode:X``    a tag that names no mode -> dropped (default mode when none is left)
``no_action``         neither search nor answer -> an "invalid action" observation, one turn spent
``empty_answer``      ``<answer></answer>`` -> treated like ``no_action``
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, Field

ActionKind = Literal["search", "answer", "none"]


class TagProtocol(BaseModel):
    """The tags of one action format."""

    search_open: str = "<search>"
    search_close: str = "</search>"
    answer_open: str = "<answer>"
    answer_close: str = "</answer>"
    think_open: str = "<think>"
    think_close: str = "</think>"

    @property
    def stops(self) -> list[str]:
        """Stop strings for one policy turn: the end of either action."""
        return [self.search_close, self.answer_close]


SEARCH_R1 = TagProtocol()
R1_SEARCHER = TagProtocol(search_open="<|begin_of_query|>", search_close="<|end_of_query|>")


class ParsedAction(BaseModel):
    """What one policy output asks for."""

    kind: ActionKind
    query: str = ""  # search: the query without mode tags
    modes: list[str] = Field(default_factory=list)  # search: the mode tags, lower-cased, in order
    answer: str = ""  # answer: the text inside the answer tags
    reasoning: str = ""  # the text before the action (the <think> content when present)
    errors: list[str] = Field(default_factory=list)
    end: int = 0  # offset in the parsed text where the action ends; later text is dropped
    closed: bool = True  # False when the closing tag was missing (the loop appends it)

    @property
    def format_error(self) -> str | None:
        return "; ".join(self.errors) if self.errors else None


def _find(text: str, tag: str, start: int = 0) -> int:
    return text.lower().find(tag.lower(), start)


def extract_reasoning(text: str, protocol: TagProtocol = SEARCH_R1) -> str:
    """The ``<think>`` content of ``text`` when present, else the text itself, stripped."""
    inside = extract_tag(text, protocol.think_open, protocol.think_close)
    return (inside if inside is not None else text).strip()


def extract_tag(text: str, open_tag: str, close_tag: str, *, last: bool = False) -> str | None:
    """The text between ``open_tag`` and ``close_tag`` (case-insensitive), or up to the end when
    the closing tag is missing; ``None`` when ``open_tag`` does not occur. The first occurrence,
    or the last with ``last=True``."""
    low = text.lower()
    at = low.rfind(open_tag.lower()) if last else low.find(open_tag.lower())
    if at < 0:
        return None
    start = at + len(open_tag)
    close = low.find(close_tag.lower(), start)
    return text[start:] if close < 0 else text[start:close]


def parse_action(text: str, protocol: TagProtocol = SEARCH_R1) -> ParsedAction:
    """Parse one policy output (including the stop string that ended it, if any).

    The first action opened wins; an action missing its closing tag ends at the next action tag
    or at the end of the text."""
    s_at = _find(text, protocol.search_open)
    a_at = _find(text, protocol.answer_open)
    if s_at < 0 and a_at < 0:
        return ParsedAction(kind="none", reasoning=extract_reasoning(text, protocol), errors=["no_action"], end=len(text))
    kind: ActionKind = "search" if a_at < 0 or (0 <= s_at < a_at) else "answer"
    open_tag, close_tag, at = (
        (protocol.search_open, protocol.search_close, s_at)
        if kind == "search"
        else (protocol.answer_open, protocol.answer_close, a_at)
    )
    other_open = protocol.answer_open if kind == "search" else protocol.search_open
    start = at + len(open_tag)
    close = _find(text, close_tag, start)
    other = _find(text, other_open, start)
    errors: list[str] = []
    closed = close >= 0 and (other < 0 or close < other)
    if closed:
        inner, end = text[start:close], close + len(close_tag)
    else:
        errors.append(f"unclosed_{kind}")
        stop = other if other >= 0 else len(text)
        inner, end = text[start:stop], stop
    if _find(text, other_open, end) >= 0 or _find(text, open_tag, end) >= 0:
        errors.append("multiple_actions")
    reasoning = extract_reasoning(text[:at], protocol)
    if kind == "search":
        return ParsedAction(kind="search", query=inner.strip(), reasoning=reasoning, errors=errors, end=end, closed=closed)
    answer = inner.strip()
    if not answer:
        errors.append("empty_answer")
        return ParsedAction(kind="none", reasoning=reasoning, errors=errors, end=end, closed=closed)
    return ParsedAction(kind="answer", answer=answer, reasoning=reasoning, errors=errors, end=end, closed=closed)


_TAG = r"\[\s*([A-Za-z][A-Za-z0-9 _-]{0,30}?)\s*\]"
_LEADING_TAGS = re.compile(rf"^\s*((?:{_TAG}\s*)+)")
_TRAILING_TAGS = re.compile(rf"((?:\s*{_TAG})+)\s*$")
_ONE_TAG = re.compile(_TAG)


def split_mode_tags(query: str) -> tuple[list[str], str]:
    """``"[graph][passage] capital of France"`` -> (["graph", "passage"], "capital of France").
    Tags are read at the start and at the end of the query (small models put them either
    side); brackets inside the query are left alone."""
    modes: list[str] = []
    lead = _LEADING_TAGS.match(query)
    if lead:
        modes += [m.strip().lower() for m in _ONE_TAG.findall(lead.group(1))]
        query = query[lead.end() :]
    trail = _TRAILING_TAGS.search(query)
    if trail and trail.start() > 0:
        modes += [m.strip().lower() for m in _ONE_TAG.findall(trail.group(1))]
        query = query[: trail.start()]
    return modes, query.strip()


class ModeChoice(BaseModel):
    """The mode a search resolved to, and the errors met on the way."""

    mode: str
    tags: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)


def resolve_modes(tags: Iterable[str], known: Iterable[str], default: str, combined: str | None = None) -> ModeChoice:
    """Map mode tags to one mode. Unknown tags are dropped (``unknown_mode:X``); no usable tag
    gives ``default`` (``missing_mode`` when there was no tag at all). Two or more distinct known
    tags give ``combined`` (RouteRAG's ``[graph][passage]`` = hybrid) when one is defined, else
    the first tag."""
    known_set = {k.lower() for k in known}
    tags = list(tags)
    errors = [f"unknown_mode:{t}" for t in tags if t not in known_set]
    valid = list(dict.fromkeys(t for t in tags if t in known_set))
    if not tags:
        errors.append("missing_mode")
    if not valid:
        return ModeChoice(mode=default, tags=tags, errors=errors)
    if len(valid) > 1 and combined is not None:
        return ModeChoice(mode=combined, tags=tags, errors=errors)
    return ModeChoice(mode=valid[0], tags=tags, errors=errors)


_FUNCTION_WORDS = frozenset(
    "a an and or but the of to in on at by for with from as is are was were be it this that query "
    "keyword keywords here your my search".split()
)


def copies_instruction(text: str, instructions: Sequence[str]) -> bool:
    """Whether ``text`` copies one of a prompt's placeholder instructions (e.g. R1-Searcher's
    'search query (only list keywords, such as "keyword_1 keyword_2 ...")') instead of filling
    it in: small untrained models do. Compared on their first 40 characters, case and
    whitespace ignored, brackets stripped."""
    body = " ".join(text.split()).strip("[]() ").lower()
    if len(body) < 20:
        return False
    for instruction in instructions:
        norm = " ".join(instruction.split()).strip("[]() ").lower()
        if norm.startswith(body[:40]) or body.startswith(norm[:40]):
            return True
    return False


def clean_query(query: str, fallback: str, max_chars: int, instructions: Sequence[str] = ()) -> tuple[str, list[str]]:
    """Repair a query: empty -> ``fallback`` (``empty_query``); only function words, as when a
    model mentions "<search> and </search>" in prose -> ``fallback`` (``trivial_query``); a copy
    of one of the prompt's placeholder ``instructions`` -> ``fallback`` (``copied_instruction``);
    longer than ``max_chars`` -> cut at the last word boundary within the limit (``long_query``).
    Whitespace is collapsed."""
    query = " ".join(query.split())
    errors: list[str] = []
    if not query:
        errors.append("empty_query")
    elif all(w in _FUNCTION_WORDS for w in re.findall(r"\w+", query.lower())):
        errors.append("trivial_query")
    elif instructions and copies_instruction(query, instructions):
        errors.append("copied_instruction")
    if errors:
        query = " ".join(fallback.split())
    if len(query) > max_chars:
        errors.append("long_query")
        cut = query[:max_chars]
        space = cut.rfind(" ")
        query = cut[:space] if space > max_chars // 2 else cut
    return query, errors


_ANSWER_LEAD = re.compile(r"^(?:the\s+)?(?:final\s+)?answer\s*(?:is)?\s*[:：]\s*", re.IGNORECASE)


def clean_answer(text: str) -> str:
    """A short answer from free text: stripped of tags, a leading "Answer:" and surrounding
    quotes, first line only (punctuation is left to the metrics' normalisation)."""
    text = re.sub(r"<[^<>]{1,40}>", " ", text).strip()
    text = text.splitlines()[0].strip() if text else ""
    return _ANSWER_LEAD.sub("", text).strip().strip("\"'`").strip()


def tagged_answer(text: str, protocol: TagProtocol = SEARCH_R1) -> tuple[str, list[str]]:
    """The answer of a one-shot ``<think>…</think><answer>…</answer>`` output. Without answer
    tags the text after ``</think>`` (else all of it) is cleaned (``missing_answer_tag``)."""
    inside = extract_tag(text, protocol.answer_open, protocol.answer_close)
    if inside is not None and inside.strip():
        return " ".join(inside.split()), []
    errors = ["empty_answer" if inside is not None else "missing_answer_tag"]
    low = text.lower()
    cut = low.rfind(protocol.think_close.lower())
    rest = text[cut + len(protocol.think_close) :] if cut >= 0 else text
    if inside is not None:
        rest = rest.replace(protocol.answer_open, " ").replace(protocol.answer_close, " ")
    return clean_answer(rest), errors


def match_name(text: str, names: Iterable[str]) -> str | None:
    """The name ``text`` designates, case-insensitively: an exact match, else the longest name
    contained in it; ``None`` when it names none."""
    cleaned = " ".join(text.strip().strip("`'\".[]").split()).lower()
    by_lower = {n.lower(): n for n in names}
    if cleaned in by_lower:
        return by_lower[cleaned]
    for low in sorted(by_lower, key=len, reverse=True):
        if low in cleaned:
            return by_lower[low]
    return None
