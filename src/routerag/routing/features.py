"""Cheap features of a query, beside its sentence embedding: question word, answer form, entity
count, length. Versioned: a router records the feature names and version it was trained with, and
is served the features of that version (:func:`query_features`), so a router trained before a
feature was added keeps working.

* v1: the question word, length, entities, digits, comparison cues, question mark.
* v2: v1 + the answer form the question's own words ask for (``yes/no``, ``choice``, ``open``:
  :func:`routerag.corpus.question_types.question_form`, the classifier behind the ``rule``
  baseline and the report's breakdown) - what decides whether a question needs retrieval at all.
"""

from __future__ import annotations

import math
import re

import numpy as np

from routerag.corpus.question_types import question_form

FEATURES_VERSION = 2  # what a router trained now records
WH_WORDS = ("who", "whom", "whose", "what", "when", "where", "which", "why", "how")
AUX_WORDS = frozenset("is are was were do does did can could has have had will would should am".split())
COMPARISON_CUES = frozenset("or both same more less older younger earlier later first last before after than".split())
ANSWER_FORMS = ("yes/no", "choice", "open")
FEATURE_SETS: dict[int, tuple[str, ...]] = {
    1: (*(f"form_{w}" for w in WH_WORDS), "form_yes_no", "form_statement",
        "entities_log1p", "chars_log1p", "tokens_log1p", "has_digit", "comparison_cue", "question_mark"),
}
FEATURE_SETS[2] = (*FEATURE_SETS[1], *(f"answer_{f.replace('/', '_')}" for f in ANSWER_FORMS))
FEATURE_NAMES: tuple[str, ...] = FEATURE_SETS[FEATURES_VERSION]

_TOKEN = re.compile(r"[A-Za-z0-9][\w'\-]*")
_ENTITY = re.compile(r"(?:\b[A-Z][\w'\-]*(?:\s+(?:of|the|de|von|van|and|&)?\s*[A-Z][\w'\-]*)*)|\"[^\"]+\"")


def question_word(tokens: list[str]) -> str:
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


def feature_names(version: int = FEATURES_VERSION) -> tuple[str, ...]:
    """The names of feature set ``version`` (a :class:`ValueError` for one this code does not compute)."""
    try:
        return FEATURE_SETS[version]
    except KeyError:
        raise ValueError(f"features v{version} are unknown to this code (it computes {sorted(FEATURE_SETS)})") from None


def query_features(query: str, version: int = FEATURES_VERSION) -> np.ndarray:
    """The values of feature set ``version`` for ``query`` (float32, in :func:`feature_names` order)."""
    feature_names(version)
    tokens = _TOKEN.findall(query)
    form = question_word(tokens)
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
    if version >= 2:
        answer = question_form(query)
        values += [float(answer == f) for f in ANSWER_FORMS]
    return np.asarray(values, dtype=np.float32)


def input_rows(queries: list[str] | tuple[str, ...], embeddings: np.ndarray | None, *, inputs: str = "embedding+features",
               version: int = FEATURES_VERSION) -> np.ndarray:
    """A learned router's classifier rows (training and routing alike): the query embeddings
    then the cheap features of ``version``, or the features alone (``inputs="features"``)."""
    feats = (np.stack([query_features(q, version) for q in queries]) if len(queries)
             else np.zeros((0, len(feature_names(version))), np.float32))
    if inputs == "features":
        return feats
    if embeddings is None:
        raise ValueError("inputs 'embedding+features' need the query embeddings")
    return np.hstack([np.asarray(embeddings, dtype=np.float32), feats])
