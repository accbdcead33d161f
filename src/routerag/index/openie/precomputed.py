"""Import a precomputed HippoRAG OpenIE file (e.g. MuSiQue's ``openie_*_gpt-3.5-turbo-1106_*.json``).

Records are matched to our documents by passage text (``title\\ntext``), then by whitespace-
normalised title+text. Documents with no match get an empty record with ``error`` set and are
listed in :attr:`PrecomputedOpenIE.unmatched`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from routerag.corpus.schema import Document
from routerag.index.openie.base import OpenIERecord, passage_hash
from routerag.index.openie.cache import read_openie_file, record_from_entry


def _loose_key(text: str) -> str:
    return " ".join(text.split()).lower()


class PrecomputedOpenIE:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        entries = read_openie_file(self.path)
        digest = hashlib.sha256(self.path.read_bytes()).hexdigest()[:12]
        self.identity = f"precomputed:{self.path.name}:{digest}"
        self._exact = {passage_hash(e["passage"]): e for e in entries}
        self._loose = {_loose_key(e["passage"]): e for e in entries}
        self.n_entries = len(entries)
        self.unmatched: list[str] = []

    def extract(self, docs: Sequence[Document]) -> list[OpenIERecord]:
        out: list[OpenIERecord] = []
        self.unmatched = []
        for doc in docs:
            entry = self._exact.get(passage_hash(doc.passage)) or self._loose.get(_loose_key(doc.passage))
            if entry is None:
                self.unmatched.append(doc.doc_id)
                out.append(OpenIERecord(doc_id=doc.doc_id, passage=doc.passage, error=f"not in {self.path.name}"))
            else:
                # keyed by our passage text, so a cache built from these records finds them again
                out.append(record_from_entry(entry, doc.doc_id).model_copy(update={"passage": doc.passage}))
        return out
