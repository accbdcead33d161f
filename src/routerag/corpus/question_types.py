"""What kind of answer a question's own form asks for — the one classifier behind the ``rule``
baseline, the per-type breakdown of ``routerag report`` and the eval summary.

* **form** (:func:`question_form`), from the question's words alone:

  - ``yes/no``: the question opens with an auxiliary verb (``Is``, ``Were``, ``Do``, ``Has``,
    ``Can``...) and does not offer two options ("Were X and Y born in the same place?");
  - ``choice``: the question names two options, ``..., X or Y?`` (the options: the span after the
    last comma or colon before the last `` or ``, and the span after it), ``Between X and Y, ...?``,
    or an auxiliary-verb question offering ``X or Y`` ("Was X or Y born first?");
  - ``open``: everything else (the answer is not in the question).

* **type** (:func:`dataset_type`), what the data says about a question: HotpotQA's own ``type``
  (``bridge`` / ``comparison``) where the record carries it, MuSiQue's hop count from its id
  (``2hop__…`` -> ``2-hop``; ``3hop1__…`` -> ``3-hop``), else None.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

QuestionForm = Literal["yes/no", "choice", "open"]
QUESTION_FORMS: tuple[QuestionForm, ...] = ("yes/no", "choice", "open")

_AUX = {
    "is", "are", "was", "were", "am", "do", "does", "did", "has", "have", "had", "can", "could",
    "will", "would", "should", "shall", "may", "might", "must",
}
_CONNECTORS = {"of", "the", "and", "for", "de", "in", "a", "an", "on", "at", "to", "la", "le", "von", "van", "du", "del", "&"}
_OR = re.compile(r"\s+or\s+", re.IGNORECASE)
_BETWEEN = re.compile(r"^between\s+(.+?)\s+and\s+(.+?)\s*,", re.IGNORECASE)
_HOPS = re.compile(r"^(\d+)hop", re.IGNORECASE)


def _words(question: str) -> list[str]:
    return re.findall(r"[\w']+", question.lower())


def _trim(option: str) -> str:
    return option.strip().strip(" ?.!,;:\"'").strip()


def _capitalised_tail(text: str) -> str:
    """The trailing run of a name: capitalised words, numbers and connectors (``of``, ``the``...),
    starting at a capitalised word — "was started first Arthur's Magazine" -> "Arthur's Magazine"."""
    tokens = text.split()
    start = len(tokens)
    for i in range(len(tokens) - 1, -1, -1):
        token = tokens[i].strip("\"'()")
        if token[:1].isupper() or token[:1].isdigit():
            start = i
        elif token.lower() not in _CONNECTORS:
            break
    while start < len(tokens) and tokens[start].strip("\"'()").lower() in _CONNECTORS:
        start += 1
    return " ".join(tokens[start:])


def _name_head(text: str) -> str:
    """The leading name of a span that goes on with a predicate — "Juan Carlos Falcón born first"
    -> "Juan Carlos Falcón", "the Brabejum the genus of ..." -> "the Brabejum"; a span with no
    capitalised word (or that is all name) is kept whole."""
    tokens = text.split()
    end = 0
    named = False
    for i, raw in enumerate(tokens):
        token = raw.strip("\"'()")
        if token[:1].isupper() or token[:1].isdigit():
            named, end = True, i + 1
        elif token.lower() in _CONNECTORS:
            continue
        else:
            break
    return " ".join(tokens[:end]) if named else text


def choice_options(question: str) -> tuple[str, str] | None:
    """The two options a question names, in order, or None. ``Between X and Y, ...``; else the
    last `` or ``: the option after it runs to the question mark, the one before it starts after
    the last comma or colon (without one: the capitalised name just before `` or ``)."""
    text = " ".join(question.split())
    between = _BETWEEN.match(text)
    if between:
        first = between.group(1)
        return _trim(first if first[:1].isupper() else _capitalised_tail(first)), _trim(between.group(2))
    matches = list(_OR.finditer(text))
    if not matches:
        return None
    cut = matches[-1]
    before, after = text[: cut.start()], text[cut.end():]
    second = _trim(_name_head(_trim(after.split("?")[0])))
    words = before.split()
    if words and words[0].lower() in _AUX:  # "Was X or Y born first?": X follows the verb
        first = _trim(" ".join(words[1:]))
        return (first, second) if first and second else None
    head = max(before.rfind(","), before.rfind(":"))
    first = _trim(before[head + 1:]) if head >= 0 else _trim(_capitalised_tail(before))
    if head >= 0 and not first[:1].isupper() and not first[:1].isdigit():
        first = _trim(_capitalised_tail(first))
    if not first or not second or len(second.split()) > 12:
        return None
    return first, second


def _is_name(option: str) -> bool:
    words = option.split()
    if words and words[0].lower() in {"the", "a", "an"}:
        words = words[1:]
    return bool(words) and (words[0][:1].isupper() or words[0][:1].isdigit())


def question_form(question: str) -> QuestionForm:
    """``yes/no``, ``choice`` or ``open`` (see the module docstring)."""
    words = _words(question)
    options = choice_options(question)
    if words and words[0] in _AUX:
        # "Is X or Y older?" offers options; "Are X and Y both ...?", "Was X known by names or
        # nicknames?" ask yes or no (the second option must be a name)
        offered = options is not None and _is_name(options[1]) and not re.search(r"\beither\b", question, re.IGNORECASE)
        return "choice" if offered else "yes/no"
    if options is not None and (question.lower().startswith(("which", "who", "what", "between", "whose", "when", "where", "in which", "how"))
                                or "," in question):
        return "choice"
    return "open"


def dataset_type(qid: str, metadata: Mapping[str, Any] | None = None) -> str | None:
    """The dataset's own type of a question: HotpotQA's ``type``, MuSiQue's hop count, or None."""
    kind = (metadata or {}).get("type")
    if isinstance(kind, str) and kind:
        return kind
    hops = _HOPS.match(qid)
    return f"{hops.group(1)}-hop" if hops else None
