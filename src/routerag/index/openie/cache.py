"""OpenIE results on disk in HippoRAG's format (``{"docs": [...], "ents_by_doc": [...]}``), keyed by
passage hash so that re-indexing never re-extracts a passage it has already seen.

The same reader serves precomputed files released with HippoRAG (see ``precomputed.py``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from routerag.config import atomic_write_text
from routerag.corpus.schema import Document
from routerag.errors import RouteragError
from routerag.index.openie.base import (
    OpenIEExtractor,
    OpenIERecord,
    clean_entities,
    clean_triples,
    passage_hash,
)


class OpenIEFileError(RouteragError, ValueError):
    """An OpenIE JSON file that cannot be read; the message names the file and the entry."""


def read_openie_file(path: str | Path) -> list[dict[str, Any]]:
    """The ``docs`` entries of a HippoRAG OpenIE file, each checked to carry a ``passage`` string and
    ``extracted_entities`` / ``extracted_triples`` lists (malformed triples inside are dropped later)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OpenIEFileError(f"{path}: no such OpenIE file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise OpenIEFileError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("docs"), list):
        raise OpenIEFileError(f'{path}: expected an object with a "docs" list (HippoRAG OpenIE format)')
    entries = data["docs"]
    for i, entry in enumerate(entries):
        where = f"{path}: docs[{i}]"
        if not isinstance(entry, dict):
            raise OpenIEFileError(f"{where}: expected an object, got {type(entry).__name__}")
        passage = entry.get("passage")
        if not isinstance(passage, str):
            # some releases keep title/text only
            if isinstance(entry.get("text"), str):
                title = entry.get("title") or ""
                entry["passage"] = f"{title}\n{entry['text']}" if title else entry["text"]
            else:
                raise OpenIEFileError(f'{where}: missing "passage" (or "text") string')
        for field in ("extracted_entities", "extracted_triples"):
            if not isinstance(entry.get(field, []), list):
                raise OpenIEFileError(f'{where}: "{field}" must be a list')
    return entries


def record_from_entry(entry: dict[str, Any], doc_id: str) -> OpenIERecord:
    return OpenIERecord(
        doc_id=doc_id,
        passage=entry["passage"],
        entities=clean_entities(entry.get("extracted_entities", [])),
        triples=clean_triples(entry.get("extracted_triples", [])),
        error=entry["error"] if isinstance(entry.get("error"), str) else None,
    )


def entry_from_record(record: OpenIERecord) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "idx": record.key,
        "doc_id": record.doc_id,
        "passage": record.passage,
        "extracted_entities": list(record.entities),
        "extracted_triples": [list(t) for t in record.triples],
    }
    if record.error:
        entry["error"] = record.error
    return entry


class OpenIECache:
    """Successful extractions by passage hash; failed ones are never cached (so they are retried)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._entries: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            for entry in read_openie_file(self.path):
                self._entries[passage_hash(entry["passage"])] = entry

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, doc: Document) -> OpenIERecord | None:
        entry = self._entries.get(passage_hash(doc.passage))
        return None if entry is None else record_from_entry(entry, doc.doc_id)

    def put(self, records: Sequence[OpenIERecord]) -> int:
        added = 0
        for record in records:
            if record.error is None:
                self._entries[record.key] = entry_from_record(record)
                added += 1
        return added

    def save(self) -> None:
        docs = list(self._entries.values())
        entities = [e for d in docs for e in d["extracted_entities"]]
        payload = {
            "docs": docs,
            "ents_by_doc": [d["extracted_entities"] for d in docs],
            "avg_ent_chars": round(sum(map(len, entities)) / len(entities), 4) if entities else 0,
            "avg_ent_words": round(sum(len(e.split()) for e in entities) / len(entities), 4) if entities else 0,
        }
        atomic_write_text(self.path, json.dumps(payload, ensure_ascii=False))


class CachedExtractor:
    """Wraps an extractor: passages already in the cache are served from it, the rest extracted
    and added. ``hits`` / ``misses`` count the last call."""

    def __init__(self, inner: OpenIEExtractor, cache: OpenIECache) -> None:
        self.inner = inner
        self.cache = cache
        self.identity = inner.identity
        self.hits = 0
        self.misses = 0

    def extract(self, docs: Sequence[Document]) -> list[OpenIERecord]:
        found = [self.cache.get(doc) for doc in docs]
        missing = [doc for doc, rec in zip(docs, found) if rec is None]
        self.hits, self.misses = len(docs) - len(missing), len(missing)
        fresh = iter(self.inner.extract(missing) if missing else [])
        out = [rec if rec is not None else next(fresh) for rec in found]
        missing_ids = {d.doc_id for d in missing}
        if missing and self.cache.put([r for r in out if r.doc_id in missing_ids]):
            self.cache.save()
        return out
