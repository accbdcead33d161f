"""WikiTableQuestions' answer scoring, written after the rules of its official ``evaluator.py``
(version 1.0.2, Pasupat & Liang).

A gold answer is a *set* of target items; a prediction is correct when it has as many distinct
items and every target item matches one of them. Two items match when

1. their normalised strings are equal (:func:`normalize`: diacritics removed, smart quotes and
   dashes made ASCII, trailing citations ``[1]``/``*``/``†`` and a trailing ``(...)`` removed,
   outermost quotes and a final period removed, lower-cased, whitespace collapsed), or
2. both are numbers with the same value (``|a - b| < 1e-6``), or
3. both are dates with the same year, month and day (``yyyy-mm-dd``, ``xx`` for a missing
   field; a year alone is the number).

Where this differs from the script, and why:

* The script reads the gold's numbers and dates from CoreNLP's canonical forms
  (``targetCanon`` in the ``tagged/`` files, not in the shared data). Here both sides are read
  by :func:`to_value`: the script's own rules, plus numbers with thousands separators
  (``12,467``) and dates written with a month name (``January 2, 1990``, ``2 Jan 1990``,
  ``March 1990``) — the forms CoreNLP canonicalises in the targets.
* The script takes the predicted items as separate fields; a model answers with one string.
  The items are the answer split at ``|`` (the release's own list separator); when the gold has
  several items and the answer holds no ``|``, at ``,``/``;``/`` and `` (a comma inside a number
  such as ``1,000`` does not split). A single-item gold is always compared with the whole answer
  (``Bangkok, Thailand``).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from routerag.eval.metrics import AnswerScheme, Golds, NoGoldAnswerError, cover_em

_CITATION = re.compile(r"((?<!^)\[[^\]]*\]|\[\d+\]|[•♦†‡*#+])*$")
_PARENTHESIS = re.compile(r"(?<!^)( \([^)]*\))*$")
_QUOTED = re.compile(r'^"([^"]*)"$')
_NUMBER = re.compile(r"^[+-]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")
_ISO_DATE = re.compile(r"^(\d{1,4}|xx|xxxx)-(\d{1,2}|xx)-(\d{1,2}|xx)$")
_MONTHS = {name: i for i, names in enumerate(
    (("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
     ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
     ("december", "dec")), start=1) for name in names}
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_MONTH_DAY_YEAR = re.compile(rf"^{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{3,4}})$")
_DAY_MONTH_YEAR = re.compile(rf"^(\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH},?\s+(\d{{3,4}})$")
_MONTH_YEAR = re.compile(rf"^{_MONTH},?\s+(\d{{3,4}})$")
_SPLITS = (re.compile(r"\s*(?:;|,(?!\d{3}(?!\d)))\s*"), re.compile(r"\s*(?:;|,(?!\d{3}(?!\d))|\band\b)\s*"))
"""Separators of a several-item answer without ``|``: commas (not inside a number) and ``;``; also ``and``."""


def normalize(text: str) -> str:
    """The evaluator's string normalisation (see the module docstring)."""
    x = "".join(c for c in unicodedata.normalize("NFKD", text) if unicodedata.category(c) != "Mn")
    x = re.sub(r"[‘’´`]", "'", x)
    x = re.sub(r"[“”]", '"', x)
    x = re.sub(r"[‐‑‒–—−]", "-", x)
    while True:
        old = x
        x = _CITATION.sub("", x.strip())
        x = _PARENTHESIS.sub("", x.strip())
        x = _QUOTED.sub(r"\1", x.strip())
        if x == old:
            break
    if x.endswith("."):
        x = x[:-1]
    return re.sub(r"\s+", " ", x).lower().strip()


@dataclass(frozen=True)
class Value:
    """One answer item: its normalised string, and its number or date when it reads as one."""

    normalized: str
    number: float | None = None
    date: tuple[int, int, int] | None = None  # (year, month, day), -1 where unknown

    def matches(self, other: "Value") -> bool:
        if self.normalized == other.normalized:
            return True
        if self.number is not None and other.number is not None:
            return abs(self.number - other.number) < 1e-6
        return self.date is not None and self.date == other.date


def _number(text: str) -> float | None:
    text = text.strip()
    if not _NUMBER.match(text):
        return None
    amount = float(text.replace(",", ""))
    return None if math.isinf(amount) else amount


def _date(text: str) -> tuple[int, int, int] | None:
    lowered = text.strip().lower()
    if iso := _ISO_DATE.match(lowered):
        year, month, day = (-1 if part.startswith("x") else int(part) for part in iso.groups())
    elif m := _MONTH_DAY_YEAR.match(lowered):
        year, month, day = int(m.group(3)), _MONTHS[m.group(1)], int(m.group(2))
    elif m := _DAY_MONTH_YEAR.match(lowered):
        year, month, day = int(m.group(3)), _MONTHS[m.group(2)], int(m.group(1))
    elif m := _MONTH_YEAR.match(lowered):
        year, month, day = int(m.group(2)), _MONTHS[m.group(1)], -1
    else:
        return None
    if year == month == day == -1 or not (month == -1 or 1 <= month <= 12) or not (day == -1 or 1 <= day <= 31):
        return None
    return year, month, day


def to_value(text: str) -> Value:
    """An item as the evaluator reads it: a number, else a date (a year alone: the number), else a string."""
    normalized = normalize(text)
    number = _number(text)
    if number is not None:
        return Value(normalized, number=number)
    date = _date(text)
    if date is not None and date[1] == date[2] == -1:
        return Value(normalized, number=float(date[0]))
    return Value(normalized, date=date)


def _identity(value: Value) -> tuple[object, ...]:
    """What makes two values one item of a set (the evaluator's equality: the amount of a number,
    the fields of a date, else the normalised string)."""
    if value.number is not None:
        return ("number", value.number)
    if value.date is not None:
        return ("date", value.date)
    return ("string", value.normalized)


def to_values(items: Sequence[str]) -> list[Value]:
    """Distinct values of a list (the evaluator compares sets)."""
    distinct: dict[tuple[object, ...], Value] = {}
    for item in items:
        value = to_value(item)
        distinct.setdefault(_identity(value), value)
    return list(distinct.values())


def check_denotation(targets: Sequence[Value], predicted: Sequence[Value]) -> bool:
    """The same number of items, and every target matched by a predicted item."""
    return len(targets) == len(predicted) and all(any(t.matches(p) for p in predicted) for t in targets)


def prediction_items(prediction: str, n_targets: int) -> list[list[str]]:
    """The readings of a model's answer as a list: the answer split at ``|`` (without one: the
    whole answer); for a several-item gold and an answer without ``|``, also split at commas (not
    inside a number) and ``;``, and at those and ``and``."""
    readings = [[p for p in (part.strip() for part in prediction.split("|")) if p]]
    if n_targets > 1 and "|" not in prediction:
        readings += [[p for p in split.split(prediction.strip()) if p] for split in _SPLITS]
    return readings


def _targets(golds: Golds) -> list[str]:
    items = [golds] if isinstance(golds, str) else list(golds)
    if not items:
        raise NoGoldAnswerError("no gold answers to score against")
    return items


def denotation_match(prediction: str, golds: Golds) -> float:
    """1.0 if the answer is the gold list (``golds``: its items) as WikiTableQuestions' evaluator
    judges it: as many distinct items, each target matched by number, date or normalised string."""
    gold = to_values(_targets(golds))
    return float(any(check_denotation(gold, to_values(items)) for items in prediction_items(prediction, len(gold))))


def covers_every_item(prediction: str, golds: Golds) -> float:
    """Cover-EM of a list answer: every gold item occurs in the answer (as whole tokens)."""
    answer = prediction.replace("|", " ")  # the list separator, which the token normalisation would glue away
    return float(all(cover_em(answer, [item]) > 0 for item in _targets(golds)))


def _joined(items: list[str]) -> list[str]:
    return [" ".join(items)]


WTQ_SCHEME = AnswerScheme(
    description="WikiTableQuestions: the answers are the items of one list; em is its evaluator's denotation match, "
                "cover_em needs every item, token metrics read the items as one answer",
    metrics={"em": denotation_match, "cover_em": covers_every_item},
    other_golds=_joined,
)
