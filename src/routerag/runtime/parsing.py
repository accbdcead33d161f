"""Parsing a policy's output into typed actions, with a defined recovery for every protocol error.

Pure functions, no model and no sources: the strategies and the training rollout share them.
A protocol is a set of tags (:class:`TagProtocol`); Search-R1/RouteRAG use ``<search>`` /
``<answer>``, GraphRAG-R1 (after R1-Searcher) ``<|begin_of_query|>`` / ``<answer>``. The action
parser and the mode tags are in :mod:`routerag.protocol.routerag_tags` (the one owner of the
RouteRAG tags); this module adds the repairs (queries, answers, names).

Error codes (each has a recovery; ``docs/concepts/protocol.md`` lists them):

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

# the action parser and the tags live in the protocol modules; imported here for the strategies
from routerag.protocol.graphrag_r1_tags import R1_SEARCHER as R1_SEARCHER
from routerag.protocol.routerag_tags import SEARCH_R1 as SEARCH_R1
from routerag.protocol.routerag_tags import ActionKind as ActionKind
from routerag.protocol.routerag_tags import ModeChoice as ModeChoice
from routerag.protocol.routerag_tags import ParsedAction as ParsedAction
from routerag.protocol.routerag_tags import TagProtocol as TagProtocol
from routerag.protocol.routerag_tags import extract_reasoning as extract_reasoning
from routerag.protocol.routerag_tags import extract_tag as extract_tag
from routerag.protocol.routerag_tags import parse_action as parse_action
from routerag.protocol.routerag_tags import resolve_modes as resolve_modes
from routerag.protocol.routerag_tags import split_mode_tags as split_mode_tags

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
_TAG = re.compile(r"<[^<>]{1,40}>")
_QUOTES = "\"'`"
# every whitespace-normalised, lower-case text _ANSWER_LEAD matches up to its colon
_LEADS = tuple(f"{the}{final}answer{gap}{is_}{colon}" for the in ("", "the ") for final in ("", "final ")
               for gap in ("", " ") for is_ in ("", "is", "is ") for colon in (":", "："))


def clean_answer(text: str) -> str:
    """A short answer from free text: stripped of tags, a leading "Answer:" and surrounding
    quotes, first line only (punctuation is left to the metrics' normalisation)."""
    text = _TAG.sub(" ", text).strip()
    text = text.splitlines()[0].strip() if text else ""
    return _ANSWER_LEAD.sub("", text).strip().strip(_QUOTES).strip()


def settled_clean_answer(text: str) -> str:
    """The part of :func:`clean_answer` of a text still being generated that no continuation of
    ``text`` can change: a prefix of ``clean_answer(text + more)`` for any ``more``. It waits on an
    unclosed tag, on a first line that may still become an "Answer:" lead, and on trailing
    whitespace and quotes (the answer's text streamed as the model writes it)."""
    text = _TAG.sub(" ", text)
    opened = text.rfind("<")
    if opened >= 0 and ">" not in text[opened:] and len(text) - opened <= 41:
        text = text[:opened]  # may still close into a tag, replaced by a space
    lines = text.strip().splitlines()
    if not lines:
        return ""
    if len(lines) > 1:  # the first line is complete
        return clean_answer(lines[0])
    first = lines[0]
    if any(lead.startswith(" ".join(first.lower().split())) for lead in _LEADS):
        return ""
    return _ANSWER_LEAD.sub("", first).strip().strip(_QUOTES).strip().rstrip(_QUOTES + " \t\f\v")


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
