"""The document store as one memory-mapped Arrow IPC file (``docs.arrow``): the documents of a
corpus beyond RAM are not Python objects.

Layout: an Arrow IPC *file* (random access) with the string columns ``doc_id``, ``title``,
``text``, ``source`` and ``metadata`` (each document's metadata as JSON text: no pickle), in record
batches of ``BATCH_ROWS`` rows; row ``i`` is document ``i`` (= FAISS vector ``i`` = BM25 row ``i``).
The schema's metadata records the format version, the row count and the corpus hash of the ids
(the hash the bundle manifest holds), so opening checks a store against its manifest without
reading every id.

Opening maps the file (``pa.memory_map`` + ``ipc.open_file``): the record batches are views into
the mapping (zero-copy), so the store costs page cache, not anonymous memory, and fetching ``k``
rows reads ``k`` rows (O(k)). The id -> row dictionary that ``row``/``get``/``in`` need is built
the first time one of them is called (one Python string per document: it is what adding documents
and graph builds use, not retrieval). Documents added to an open store stay in memory until
``save`` rewrites the file (old batches copied as they are, new ones appended).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from pydantic import ValidationError

from routerag.corpus.schema import Document
from routerag.index.docstore import ARROW_NAME, DocStore

FORMAT_VERSION = "1"
BATCH_ROWS = 16_384
COLUMNS = ("doc_id", "title", "text", "source", "metadata")


def _schema(pa: Any, corpus_hash: str, rows: int) -> Any:
    return pa.schema(
        [pa.field(name, pa.string(), nullable=False) for name in COLUMNS],
        metadata={"routerag.docstore": FORMAT_VERSION, "corpus_hash": corpus_hash, "rows": str(rows)},
    )


def _hash_and_count(ids: Iterable[str]) -> tuple[str, int]:
    """``routerag.index.manifest.corpus_hash`` of ``ids``, and how many there were."""
    h = hashlib.sha256()
    n = 0
    for doc_id in ids:
        h.update(doc_id.encode("utf-8"))
        h.update(b"\n")
        n += 1
    return h.hexdigest()[:32], n


def _batch(pa: Any, schema: Any, docs: Sequence[Document]) -> Any:
    return pa.record_batch(
        [
            pa.array([d.doc_id for d in docs], pa.string()),
            pa.array([d.title for d in docs], pa.string()),
            pa.array([d.text for d in docs], pa.string()),
            pa.array([d.source for d in docs], pa.string()),
            pa.array([json.dumps(d.metadata, ensure_ascii=False) for d in docs], pa.string()),
        ],
        schema=schema,
    )


def _chunks(docs: Iterable[Document], size: int) -> Iterator[list[Document]]:
    chunk: list[Document] = []
    for doc in docs:
        chunk.append(doc)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def write_arrow(docs: Callable[[], Iterable[Document]], path: Path) -> None:
    """Write the documents ``docs()`` yields to ``path`` as an Arrow IPC file, atomically (a
    hidden temporary file renamed into place). ``docs`` is called twice: once for the ids (the
    corpus hash goes into the schema, which comes first in the file), once to write; neither
    pass holds more than one batch of documents."""
    import pyarrow as pa

    corpus_hash, rows = _hash_and_count(d.doc_id for d in docs())
    schema = _schema(pa, corpus_hash, rows)
    _write(path, schema, (_batch(pa, schema, chunk) for chunk in _chunks(docs(), BATCH_ROWS)))


def _write(path: Path, schema: Any, batches: Iterable[Any]) -> None:
    from pyarrow import ipc

    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with ipc.new_file(str(tmp), schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _corrupt(path: Path, why: object) -> ValueError:
    return ValueError(
        f"{path}: not a readable routerag Arrow document store ({why}); the file is truncated or corrupt: "
        "rebuild the index, or convert its docs.jsonl again with `routerag convert-docstore`"
    )


class _Rows(Sequence[Document]):
    """``store.docs`` of an Arrow store: a read-only sequence that fetches rows on demand."""

    def __init__(self, store: ArrowDocStore) -> None:
        self._store = store

    def __len__(self) -> int:
        return len(self._store)

    @overload
    def __getitem__(self, index: int) -> Document: ...

    @overload
    def __getitem__(self, index: slice) -> list[Document]: ...

    def __getitem__(self, index: int | slice) -> Document | list[Document]:
        if isinstance(index, slice):
            return self._store.at(range(*index.indices(len(self))))
        if index < 0:
            index += len(self)
        return self._store.at([index])[0]

    def __iter__(self) -> Iterator[Document]:
        return self._store.iter_docs()


class ArrowDocStore(DocStore):
    """Documents in a memory-mapped Arrow IPC file; the same interface as :class:`DocStore`."""

    kind = "arrow"

    def __init__(self, path: Path, batches: list[Any], corpus_hash: str) -> None:  # noqa: D107 (use open())
        self.path = Path(path)
        self._batches = batches  # pyarrow RecordBatches: views into the memory map
        self._starts = [0]
        for batch in batches:
            self._starts.append(self._starts[-1] + batch.num_rows)
        self._hash: str | None = corpus_hash
        self._pending: list[Document] = []  # added, not yet saved
        self._row_of: dict[str, int] | None = None  # built on first id lookup

    # ---------------------------------------------------------------- open / save
    @classmethod
    def open(cls, directory: str | Path) -> ArrowDocStore:
        """Map ``directory/docs.arrow``; a truncated or corrupt file raises ``ValueError``."""
        import pyarrow as pa
        from pyarrow import ipc

        path = Path(directory) / ARROW_NAME
        try:
            reader = ipc.open_file(pa.memory_map(str(path), "r"))
            batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
            for batch in batches:
                batch.validate()
        except (pa.ArrowException, OSError) as exc:
            if isinstance(exc, FileNotFoundError):
                raise
            raise _corrupt(path, exc) from None
        meta = {k.decode(): v.decode() for k, v in (reader.schema.metadata or {}).items()}
        if meta.get("routerag.docstore") != FORMAT_VERSION or "corpus_hash" not in meta:
            raise _corrupt(path, f"schema metadata {meta or '(none)'} is not routerag's docstore v{FORMAT_VERSION}")
        names = tuple(reader.schema.names)
        if names != COLUMNS or any(not pa.types.is_string(t) for t in reader.schema.types):
            raise _corrupt(path, f"columns {names}, expected the string columns {COLUMNS}")
        rows = sum(b.num_rows for b in batches)
        if str(rows) != meta.get("rows"):
            raise _corrupt(path, f"{rows} rows, the schema records {meta.get('rows')}")
        return cls(path, batches, meta["corpus_hash"])

    @classmethod
    def load(cls, directory: str | Path) -> ArrowDocStore:
        return cls.open(directory)

    def save(self, directory: str | Path) -> None:
        """Write the store (mapped rows plus added ones) to ``directory/docs.arrow`` and map it."""
        import pyarrow as pa

        path = Path(directory) / ARROW_NAME
        if path == self.path and not self._pending:
            return
        corpus_hash = self.corpus_hash()
        schema = _schema(pa, corpus_hash, len(self))

        def batches() -> Iterator[Any]:
            for batch in self._batches:
                yield pa.record_batch(batch.columns, schema=schema)  # the mapped buffers, copied to the file
            for chunk in _chunks(self._pending, BATCH_ROWS):
                yield _batch(pa, schema, chunk)

        _write(path, schema, batches())
        reopened = ArrowDocStore.open(directory)
        row_of = self._row_of
        self.__dict__.update(reopened.__dict__)
        self._row_of = row_of  # the ids did not change

    # ---------------------------------------------------------------- access
    def _mapped(self) -> int:
        return self._starts[-1]

    def __len__(self) -> int:
        return self._mapped() + len(self._pending)

    @property
    def docs(self) -> Sequence[Document]:
        return _Rows(self)

    def _document(self, values: Sequence[Any], row: int) -> Document:
        record = dict(zip(COLUMNS, values))
        try:
            record["metadata"] = json.loads(record["metadata"])
            return Document.model_validate(record)
        except (json.JSONDecodeError, TypeError, ValidationError) as exc:
            raise _corrupt(self.path, f"row {row}: {exc}") from None

    def at(self, rows: Iterable[int]) -> list[Document]:
        """The documents at ``rows`` (any order, repeats allowed): O(len(rows))."""
        out = []
        mapped = self._mapped()
        for r in rows:
            r = int(r)
            if not 0 <= r < len(self):
                raise IndexError(f"row {r} out of range for a store of {len(self)} documents")
            if r >= mapped:
                out.append(self._pending[r - mapped])
                continue
            b = bisect.bisect_right(self._starts, r) - 1
            batch, j = self._batches[b], r - self._starts[b]
            out.append(self._document([batch.column(c)[j].as_py() for c in range(len(COLUMNS))], r))
        return out

    def iter_docs(self) -> Iterator[Document]:
        """Every document in row order, one batch converted at a time."""
        for b, batch in enumerate(self._batches):
            columns = [batch.column(c).to_pylist() for c in range(len(COLUMNS))]
            for j, values in enumerate(zip(*columns)):
                yield self._document(values, self._starts[b] + j)
        yield from self._pending

    def iter_ids(self) -> Iterator[str]:
        for batch in self._batches:
            yield from batch.column(0).to_pylist()
        for doc in self._pending:
            yield doc.doc_id

    def ids(self) -> list[str]:
        return list(self.iter_ids())

    def corpus_hash(self) -> str:
        if self._hash is None:
            self._hash = _hash_and_count(self.iter_ids())[0]
        return self._hash

    def _rows(self) -> dict[str, int]:
        if self._row_of is None:
            self._row_of = {doc_id: i for i, doc_id in enumerate(self.iter_ids())}
        return self._row_of

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._rows()

    def row(self, doc_id: str) -> int:
        return self._rows()[doc_id]

    def get(self, doc_id: str) -> Document:
        return self.at([self.row(doc_id)])[0]

    def add(self, docs: Iterable[Document]) -> list[Document]:
        """Append documents whose id is new (kept in memory until ``save``)."""
        rows = self._rows()
        added = []
        for doc in docs:
            if doc.doc_id in rows:
                continue
            rows[doc.doc_id] = len(self)
            self._pending.append(doc)
            added.append(doc)
        if added:
            self._hash = None
        return added
