"""The OpenIE interface: per passage, named entities and (subject, relation, object) triples.

Three providers implement :class:`OpenIEExtractor` and are registered lazily in
:data:`EXTRACTORS`: ``precomputed`` (a HippoRAG OpenIE JSON file), ``spacy`` (offline,
dependency patterns) and ``llm`` (HippoRAG-style NER-then-triples prompts over a ``ChatModel``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field

from routerag.corpus.schema import Document
from routerag.registry import Registry, classes_with

Triple = tuple[str, str, str]


def passage_hash(passage: str) -> str:
    """Cache key of a passage (``title\\ntext``): the same text always gives the same key."""
    return "chunk-" + hashlib.md5(passage.encode("utf-8")).hexdigest()


_NON_WORD = re.compile(r"[^\w ]+")


def normalise_phrase(text: str) -> str:
    """Entity-node key: lower case, punctuation to spaces, whitespace collapsed
    (``"St. Maurice's Abbey"`` -> ``"st maurice s abbey"``)."""
    return " ".join(_NON_WORD.sub(" ", text.lower().replace("_", " ")).split())


class OpenIERecord(BaseModel):
    """What one passage yielded. ``error`` is set (and the lists are empty) when extraction failed
    for this passage; an error never aborts a batch."""

    doc_id: str
    passage: str
    entities: list[str] = Field(default_factory=list)
    triples: list[Triple] = Field(default_factory=list)
    error: str | None = None

    @property
    def key(self) -> str:
        return passage_hash(self.passage)


def clean_entities(entities: Iterable[object]) -> list[str]:
    """Strings only, stripped, non-empty, first occurrence kept."""
    seen: dict[str, None] = {}
    for entity in entities:
        if isinstance(entity, str) and entity.strip():
            seen.setdefault(entity.strip(), None)
    return list(seen)


def clean_triples(triples: Iterable[object]) -> list[Triple]:
    """Keep well-formed triples: exactly three non-empty strings (numbers are stringified),
    subject != object; duplicates dropped, order kept."""
    out: dict[Triple, None] = {}
    for triple in triples:
        if not isinstance(triple, (list, tuple)) or len(triple) != 3:
            continue
        parts = [str(p).strip() if isinstance(p, (str, int, float)) else "" for p in triple]
        if not all(parts):
            continue
        subject, relation, obj = parts
        if normalise_phrase(subject) == normalise_phrase(obj):
            continue
        out.setdefault((subject, relation, obj), None)
    return list(out)


@runtime_checkable
class OpenIEExtractor(Protocol):
    """``extract`` returns one record per document, in order. ``identity`` is written into index
    manifests so that an index built with one extractor is not silently extended by another."""

    identity: str

    def extract(self, docs: Sequence[Document]) -> list[OpenIERecord]: ...


EXTRACTORS: Registry[type] = Registry("openie extractor", classes_with())
EXTRACTORS.register("precomputed", "routerag.index.openie.precomputed:PrecomputedOpenIE")
EXTRACTORS.register("spacy", "routerag.index.openie.spacy_extractor:SpacyOpenIE")
EXTRACTORS.register("llm", "routerag.index.openie.llm_extractor:LLMOpenIE")
