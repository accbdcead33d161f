"""Cheap features of a query, beside its sentence embedding: question form, entity count, length.
Versioned: a router records the feature names and version it was trained with."""

from __future__ import annotations

import math
import re

import numpy as np

FEATURES_VERSION = 1
WH_WORDS = ("who", "whom", "whose", "what", "when", "where", "which", "why", "how")
AUX_WORDS = frozenset("is are was were do does did can could has have had will would should am".split())
COMPARISON_CUES = frozenset("or both same more less older younger earlier later first last before after than".split())
FEATURE_NAMES: tuple[str, ...] = (
    *(f"form_{w}" for w in WH_WORDS), "form_yes_no", "form_statement",
    "entities_log1p", "chars_log1p", "tokens_log1p", "has_digit", "comparison_cue", "question_mark",
)

_TOKEN = re.compile(r"[A-Za-z0-9][\w'\-]*")
_ENTITY = re.compile(r"(?:\b[A-Z][\w'\-]*(?:\s+(?:of|the|de|von|van|and|&)?\s*[A-Z][\w'\-]*)*)|\"[^\"]+\"")


def question_form(tokens: list[str]) -> str:
    """The question word among the first three tokens (``yes_no`` for an auxiliary first), else ``statement``."""
    lowered = [t.lower() for t in tokens[:3]]
    for t in lowered:
        if t in WH_WORDS:
            return t
    if lowered and lowered[0] in AUX_WORDS:
        return "yes_no"
    return "statement"


def entity_count(query: str) -> int:
    """Capitalised spans and quoted strings, not counting a capitalised first word alone."""
    spans = _ENTITY.findall(query)
    first = _TOKEN.match(query.strip())
    if spans and first and spans[0] == first.group(0) and first.group(0).lower() in (*WH_WORDS, *AUX_WORDS):
        spans = spans[1:]
    return len(spans)


def query_features(query: str) -> np.ndarray:
    """The :data:`FEATURE_NAMES` values of ``query`` (float32)."""
    tokens = _TOKEN.findall(query)
    form = question_form(tokens)
    lowered = {t.lower() for t in tokens}
    values = [float(form == w) for w in WH_WORDS] + [float(form == "yes_no"), float(form == "statement")]
    values += [
        math.log1p(entity_count(query)),
        math.log1p(len(query)),
        math.log1p(len(tokens)),
        float(any(c.isdigit() for c in query)),
        float(bool(lowered & COMPARISON_CUES)),
        float("?" in query),
    ]
    return np.asarray(values, dtype=np.float32)
