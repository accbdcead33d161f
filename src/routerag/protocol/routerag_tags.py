"""The RouteRAG tag protocol, in one place: the tags, the mode <-> tag table, the parsers, the
renderers of a turn's parts and the GBNF grammar of one turn.

One episode, as the policy writes it and the environment answers::

    <think> reasoning </think>
    <search> [graph][passage] query </search>        (the policy; mode tags inside the search)
    <information>Doc 1(Title: t) text
    </information>                                   (the environment's observation)
    <think> ... </think>
    <answer> final answer </answer>

Used by the RouteRAG strategy (:mod:`routerag.strategies.routerag`), the training environment
(:mod:`routerag.train.env`), the golden trajectories and the toy task (:mod:`routerag.train`) and
the Search-R1 adapter of the retrieval server. Two tag readers, on purpose:

* :func:`split_mode_tags` reads a *policy's* query: tags at its start or end (small models put
  them either side), ``[ graph ]`` spacing tolerated, tag words only;
* :func:`leading_mode_tags` reads a *trainer's* request to the server (Search-R1 clients put the
  tags first): leading tags only, bracketed words without spaces (the server passes its known
  tag names; any other bracketed word is query text), de-duplicated.

This module imports only pydantic and :class:`routerag.trace.Hit` (no strategy, model or
server code), so every layer can use it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from routerag.trace import Hit

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
SEARCH_OPEN, SEARCH_CLOSE = "<search>", "</search>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
INFORMATION_OPEN, INFORMATION_CLOSE = "<information>", "</information>"

Mode = Literal["passage", "graph", "hybrid"]
MODES: tuple[Mode, ...] = ("passage", "graph", "hybrid")
# the mode <-> tag table: [graph][passage] (both methods) is the hybrid mode
MODE_TAGS: dict[str, str] = {"passage": "[passage]", "graph": "[graph]", "hybrid": "[graph][passage]"}
COMBINED_MODE = "hybrid"  # what two or more distinct known tags resolve to

# Relative price of one retrieval call per mode (RouteRAG: graph retrieval is "substantially more
# expensive" than dense passage retrieval; hybrid runs both). Deterministic, so a reward built on it
# does not depend on machine load. The RouteRAG episode charges these by default
# (``RouteRAGParams.mode_cost``) and records the charge as ``Step.retrieval_cost``.
DEFAULT_MODE_COST: dict[str, float] = {"passage": 1.0, "graph": 3.0, "hybrid": 4.0}
UNLISTED_PRICE = 1.0  # a mode or source that a price table does not list


ActionKind = Literal["search", "answer", "none"]


class TagProtocol(BaseModel):
    """The tags of one action format (defaults: RouteRAG / Search-R1's)."""

    search_open: str = SEARCH_OPEN
    search_close: str = SEARCH_CLOSE
    answer_open: str = ANSWER_OPEN
    answer_close: str = ANSWER_CLOSE
    think_open: str = THINK_OPEN
    think_close: str = THINK_CLOSE

    @property
    def stops(self) -> list[str]:
        """Stop strings for one policy turn: the end of either action."""
        return [self.search_close, self.answer_close]


SEARCH_R1 = TagProtocol()


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


_SERVER_ONE_TAG = re.compile(r"\s*\[([^\[\]\s]{1,32})\]")


def leading_mode_tags(query: str, known: Collection[str] | None = None) -> tuple[tuple[str, ...], str]:
    """A Search-R1 request's query: ``"[graph][passage] who"`` -> ``(("graph", "passage"), "who")``.
    Only leading tags count; tag names are lower-cased and de-duplicated in order. A tag is a
    bracketed word without inner spaces (``[PASSAGE]`` is ``passage``; ``[ passage ]`` is text).

    With ``known`` (lower-case tag names), reading stops at the first bracketed word that is
    not one of them, and that word stays in the query text: ``"[1990s] films"`` is searched as
    ``"[1990s] films"``, ``"[graph][1990s] films"`` as ``"[1990s] films"`` on the graph source."""
    tags: list[str] = []
    at = 0
    while match := _SERVER_ONE_TAG.match(query, at):
        tag = match.group(1).lower()
        if known is not None and tag not in known:
            break
        if tag not in tags:
            tags.append(tag)
        at = match.end()
    return tuple(tags), query[at:].strip()


def mode_of_tags(tags: Iterable[str], known: Iterable[str] = MODES, default: str = "passage") -> str:
    """The mode a list of tags selects (:func:`resolve_modes` with RouteRAG's combined mode)."""
    return resolve_modes(tags, known, default, combined=COMBINED_MODE).mode


# ---------------------------------------------------------------- renderers


def render_tags(tags: Sequence[str]) -> str:
    """``["graph", "passage"]`` -> ``"[graph][passage]"``."""
    return "".join(f"[{t}]" for t in tags)


def render_think(reasoning: str) -> str:
    return f"{THINK_OPEN} {reasoning} {THINK_CLOSE}"


def render_search(tags: Sequence[str], query: str) -> str:
    """``<search> [graph][passage] query </search>``; with no query, ``<search> [graph] </search>``
    (a routing-only action). ``tags`` are tag words (``MODE_TAGS`` gives a mode's)."""
    return " ".join(part for part in (SEARCH_OPEN, render_tags(tags), query, SEARCH_CLOSE) if part)


def render_mode_search(mode: str, query: str) -> str:
    """The search of one RouteRAG mode, with the mode's tags from ``MODE_TAGS``."""
    return " ".join(part for part in (SEARCH_OPEN, MODE_TAGS[mode], query, SEARCH_CLOSE) if part)


def render_answer(answer: str) -> str:
    return f"{ANSWER_OPEN} {answer} {ANSWER_CLOSE}"


def format_docs(hits: Sequence[Hit]) -> str:
    """Search-R1 / FlashRAG reference format: ``Doc 1(Title: t) text`` one per line."""
    return "".join(f"Doc {i}(Title: {h.title}) {h.text}\n" for i, h in enumerate(hits, start=1))


def information_block(hits: Sequence[Hit]) -> str:
    """RouteRAG / Search-R1 observation appended to the assistant turn after ``</search>``."""
    body = format_docs(hits) or "No documents found.\n"
    return f"\n\n{INFORMATION_OPEN}{body}{INFORMATION_CLOSE}\n\n"


def routerag_grammar(mode_tags: Sequence[str]) -> str:
    """A GBNF grammar for one RouteRAG turn: optional ``<think>``, then one search with one of the
    given mode-tag strings (e.g. ``"[graph][passage]"``) or one answer."""
    tags = " | ".join(f'"{t}"' for t in mode_tags)
    return "\n".join(
        [
            "root ::= think? (search | answer)",
            f'think ::= "{THINK_OPEN}" [^<]+ "{THINK_CLOSE}" "\\n"?',
            f'search ::= "{SEARCH_OPEN} " tags " " text " {SEARCH_CLOSE}"',
            f"tags ::= {tags}",
            f'answer ::= "{ANSWER_OPEN} " text " {ANSWER_CLOSE}"',
            "text ::= [^<\\n]+",
        ]
    )
