"""The documents of an index, with id -> row lookup.

Two stores with one interface (row ``i`` = document ``i`` = vector ``i`` in both):

* :class:`DocStore`: every document a Python object, persisted as JSON lines (``docs.jsonl``, no
  pickle). The default; right for small and mid-size corpora.
* :class:`routerag.index.arrow_docstore.ArrowDocStore` (``docstore: arrow``): one memory-mapped
  Arrow IPC file (``docs.arrow``); documents are read by row on demand (zero-copy, O(k) for k
  rows), so the corpus does not live in Python objects. Needs pyarrow (imported lazily).

:mod:`routerag.index.stores` opens whichever file a bundle holds and writes either.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from pydantic import ValidationError

from routerag.config import atomic_write_text
from routerag.corpus.schema import Document
from routerag.index.manifest import corpus_hash

DOCS_NAME = "docs.jsonl"
ARROW_NAME = "docs.arrow"
STORE_FILES = {"jsonl": DOCS_NAME, "arrow": ARROW_NAME}


class DocStore:
    """Documents in memory (a list), saved as ``docs.jsonl``."""

    kind = "jsonl"

    def __init__(self, docs: Iterable[Document] = ()) -> None:
        self._docs: list[Document] = []
        self._row: dict[str, int] = {}
        self.add(docs)

    @property
    def docs(self) -> Sequence[Document]:
        """Every document by row (``docs[i]`` is row ``i``)."""
        return self._docs

    def add(self, docs: Iterable[Document]) -> list[Document]:
        """Append documents whose id is new; returns the ones actually added (duplicates skipped)."""
        added = []
        for doc in docs:
            if doc.doc_id in self._row:
                continue
            self._row[doc.doc_id] = len(self._docs)
            self._docs.append(doc)
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

    def corpus_hash(self) -> str:
        """The order-sensitive hash of the ids that manifests record."""
        return corpus_hash(self.ids())

    def save(self, directory: str | Path) -> None:
        text = "".join(d.model_dump_json() + "\n" for d in self.docs)
        atomic_write_text(Path(directory) / DOCS_NAME, text)

    @classmethod
    def load(cls, directory: str | Path) -> "DocStore":
        return cls(iter_jsonl(Path(directory) / DOCS_NAME))


def iter_jsonl(path: Path) -> Iterator[Document]:
    """The documents of a ``docs.jsonl`` file one by one (a corrupt line raises ``ValueError``)."""
    with path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield Document.model_validate(json.loads(line))
            except (json.JSONDecodeError, ValidationError) as exc:
                raise ValueError(f"{path}:{lineno}: corrupt document record: {exc}") from None
