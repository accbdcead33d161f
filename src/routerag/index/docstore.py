"""The documents of an index, persisted as JSON lines (no pickle), with id -> row lookup."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import ValidationError

from routerag.config import atomic_write_text
from routerag.corpus.schema import Document

DOCS_NAME = "docs.jsonl"


class DocStore:
    def __init__(self, docs: Iterable[Document] = ()) -> None:
        self.docs: list[Document] = []
        self._row: dict[str, int] = {}
        self.add(docs)

    def add(self, docs: Iterable[Document]) -> list[Document]:
        """Append documents whose id is new; returns the ones actually added (duplicates skipped)."""
        added = []
        for doc in docs:
            if doc.doc_id in self._row:
                continue
            self._row[doc.doc_id] = len(self.docs)
            self.docs.append(doc)
            added.append(doc)
        return added

    def __len__(self) -> int:
        return len(self.docs)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._row

    def row(self, doc_id: str) -> int:
        return self._row[doc_id]

    def get(self, doc_id: str) -> Document:
        return self.docs[self._row[doc_id]]

    def at(self, rows: Sequence[int]) -> list[Document]:
        return [self.docs[r] for r in rows]

    def ids(self) -> list[str]:
        return [d.doc_id for d in self.docs]

    def save(self, directory: str | Path) -> None:
        text = "".join(d.model_dump_json() + "\n" for d in self.docs)
        atomic_write_text(Path(directory) / DOCS_NAME, text)

    @classmethod
    def load(cls, directory: str | Path) -> "DocStore":
        path = Path(directory) / DOCS_NAME
        docs = []
        with path.open(encoding="utf-8") as handle:
            for lineno, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    docs.append(Document.model_validate(json.loads(line)))
                except (json.JSONDecodeError, ValidationError) as exc:
                    raise ValueError(f"{path}:{lineno}: corrupt document record: {exc}") from None
        return cls(docs)
