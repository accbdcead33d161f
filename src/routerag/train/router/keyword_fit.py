"""Keyword rules fitted from measured outcomes, without a model (the ``keyword`` router's rules,
:mod:`routerag.routing.keyword`), and their cross-validation by question.

On the training questions only: the default is their best fixed choice; for every other choice
``c`` and every word ``w`` (lower-cased ``[a-z0-9]+`` tokens of two or more characters, stop-words
dropped), the questions holding ``w`` where sending them to ``c`` instead of the default changes
the outcome are counted: **wins** (``c`` finds a gold answer, the default does not) and **losses**
(the reverse). A word becomes a rule ``\\bw\\b -> c`` when ``wins + losses`` (its support) is at
least ``min_support`` and ``wins / (wins + losses)`` (its precision) at least ``min_precision``;
each choice keeps its ``max_rules`` best (highest precision, then support, then the word), a word
sends to one choice only, and the rules are ordered by precision, then support, then word.
Deterministic; interactions between rules are not modelled.

:func:`cross_validated_choices` fits one rule set per fold on that fold's training questions
(the grouped folds of :func:`routerag.train.router.fit.grouped_folds`) and routes each held-out
question with the rules of the fold that did not see it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, Field

from routerag.routing.features import AUX_WORDS
from routerag.routing.keyword import KeywordRouter
from routerag.routing.keyword_rules import KeywordRule, KeywordRules
from routerag.routing.source_routing import ROUTE_QUERY_CHARS
from routerag.train.router.outcomes import QuestionOutcome, best_fixed

_WORD = re.compile(r"[a-z0-9]+")
STOP_WORDS = AUX_WORDS | frozenset(
    "a an the of in on at to for from by with about as into onto over under between and or nor but not no "
    "it its this that these those there here he she they them his her their him we us our you your i me my "
    "be been being than then so such also very just only any some each every all both".split())
"""Function words never made into rules (the question words stay: "who" or "when" can route)."""


class KeywordSettings(BaseModel):
    """How keyword rules are fitted and cross-validated."""

    folds: int = Field(5, ge=2, description="cross-validation folds, grouped by question")
    min_support: int = Field(3, ge=1, description="questions where the rule changes the outcome, at least")
    min_precision: float = Field(0.6, gt=0.5, le=1.0, description="of those, the share it gets right, at least")
    max_rules: int = Field(3, ge=1, description="rules per choice, at most")


def words(text: str) -> set[str]:
    """The distinct words a rule can be made of: lower-cased ``[a-z0-9]+`` tokens of two or more
    characters, stop-words dropped (of the text the router matches: its first characters)."""
    return {w for w in _WORD.findall(text[:ROUTE_QUERY_CHARS].lower()) if len(w) > 1 and w not in STOP_WORDS}


def fit_rules(records: Sequence[QuestionOutcome], choices: Sequence[str], settings: KeywordSettings) -> KeywordRules:
    """The keyword rules of ``records`` (the training questions, and only them)."""
    default = best_fixed(records, choices)
    wins: Counter[tuple[str, str]] = Counter()
    losses: Counter[tuple[str, str]] = Counter()
    for r in records:
        base = r.choices[default].found
        for c in choices:
            if c != default and r.choices[c].found != base:
                for w in words(r.question):
                    (losses if base else wins)[(w, c)] += 1
    scored: dict[str, tuple[float, int, str]] = {}  # word -> (precision, support, choice): its best choice
    for (w, c) in sorted(set(wins) | set(losses)):
        support = wins[(w, c)] + losses[(w, c)]
        precision = wins[(w, c)] / support
        if support >= settings.min_support and precision >= settings.min_precision:
            if w not in scored or (precision, support) > scored[w][:2]:
                scored[w] = (precision, support, c)
    best = sorted(scored.items(), key=lambda item: (-item[1][0], -item[1][1], item[0]))
    kept: list[tuple[str, str]] = []
    for c in choices:
        kept += [(w, c) for w, (_, _, chosen) in best if chosen == c][:settings.max_rules]
    order = {w: i for i, (w, _) in enumerate(best)}
    rules = [KeywordRule(pattern=rf"\b{re.escape(w)}\b", choice=c) for w, c in sorted(kept, key=lambda wc: order[wc[0]])]
    return KeywordRules(rules=rules, default=default)


def cross_validated_choices(records: Sequence[QuestionOutcome], choices: Sequence[str],
                            settings: KeywordSettings) -> tuple[list[str], list[KeywordRules]]:
    """Every question's choice by the rules of the fold that held it out, and each fold's rules."""
    from routerag.train.router.fit import grouped_folds

    chosen = [""] * len(records)
    fitted = []
    for train, test in grouped_folds(np.array([r.qid for r in records]), settings.folds):
        rules = fit_rules([records[i] for i in train], choices, settings)
        router = KeywordRouter(rules)
        for i in test:
            chosen[i] = router.decide(records[i].question)
        fitted.append(rules)
    return chosen, fitted
