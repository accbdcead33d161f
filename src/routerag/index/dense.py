"""Dense passage index: embeddings of ``title\\ntext`` in FAISS (inner product over normalised
vectors, i.e. cosine). Row ``i`` of the FAISS index is row ``i`` of the bundle's DocStore.

Files: ``faiss.index`` (``faiss.write_index``, no pickle) and ``manifest.json``. The embedder is
built lazily on first use, so opening an index does not load the model.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from routerag.index.embedder import Embedder, EmbedderConfig, build_embedder
from routerag.index.manifest import IndexError_, Manifest, corpus_hash, read_manifest, write_manifest
from routerag.index.settings import DenseSettings, IndexSettings

if TYPE_CHECKING:
    from routerag.corpus.schema import Document
    from routerag.index.docstore import DocStore

FAISS_NAME = "faiss.index"


def _embedder_key(config: EmbedderConfig) -> dict[str, Any]:
    """The embedder fields that change the vectors (batch size and API key do not)."""
    return config.model_dump(include={"backend", "model", "base_url", "query_prefix", "passage_prefix"})


def _new_faiss(dim: int, settings: DenseSettings):
    import faiss

    if settings.faiss == "hnsw":
        index = faiss.IndexHNSWFlat(dim, settings.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = settings.hnsw_ef_construction
        index.hnsw.efSearch = settings.hnsw_ef_search
        return index
    return faiss.IndexFlatIP(dim)


def _write_faiss(index, path: Path) -> None:
    import faiss

    tmp = path.with_name(f".{path.name}.tmp")
    try:
        faiss.write_index(index, str(tmp))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class DenseIndex:
    """FAISS ``IndexFlatIP`` (exact) or ``IndexHNSWFlat`` (approximate) over passage embeddings."""

    kind: ClassVar[str] = "dense"

    def __init__(self, store: "DocStore", settings: IndexSettings, index, manifest: Manifest) -> None:
        self.store = store
        self.settings = settings
        self.faiss_index = index
        self.manifest = manifest
        self._embedder: Embedder | None = None
        self._lock = threading.Lock()  # sources fan out in threads; build the model once

    # ---------------------------------------------------------------- embedder
    @property
    def embedder(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                embedder = build_embedder(self.settings.embedder)
                if embedder.dim != self.faiss_index.d:
                    raise IndexError_(
                        f"embedder {embedder.identity!r} gives {embedder.dim}-d vectors; the index holds {self.faiss_index.d}-d"
                    )
                self._embedder = embedder
            return self._embedder

    def embed_documents(self, docs: Sequence["Document"]) -> np.ndarray:
        return self.embedder.encode([d.passage for d in docs], is_query=False)

    def embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        return self.embedder.encode(list(queries), is_query=True)

    # ---------------------------------------------------------------- build / load
    @classmethod
    def build(cls, store: "DocStore", directory: Path, settings: IndexSettings) -> "DenseIndex":
        if len(store) == 0:
            raise ValueError("cannot build a dense index over zero documents")
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        embedder = build_embedder(settings.embedder)
        vectors = embedder.encode([d.passage for d in store.docs], is_query=False)
        index = _new_faiss(embedder.dim, settings.dense)
        index.add(vectors)
        manifest = Manifest(
            kind=cls.kind,
            corpus_hash=corpus_hash(store.ids()),
            n_docs=len(store),
            embedder=embedder.identity,
            params={
                "dim": embedder.dim,
                "embedder_config": _embedder_key(settings.embedder),
                **settings.dense.model_dump(),
            },
        )
        _write_faiss(index, directory / FAISS_NAME)
        write_manifest(directory, manifest)
        self = cls(store, settings, index, manifest)
        self._embedder = embedder
        return self

    @classmethod
    def load(cls, directory: Path, store: "DocStore", settings: IndexSettings) -> "DenseIndex":
        import faiss

        directory = Path(directory)
        manifest = read_manifest(directory, kind=cls.kind, corpus_hash=corpus_hash(store.ids()))
        built_with = manifest.params.get("embedder_config")
        wanted = _embedder_key(settings.embedder)
        if built_with != wanted:
            raise IndexError_(
                f"{directory}: built with embedder {built_with}, configured {wanted}; rebuild or drop the override"
            )
        if manifest.params.get("faiss") != settings.dense.faiss:
            raise IndexError_(
                f"{directory}: a {manifest.params.get('faiss')!r} FAISS index, configured {settings.dense.faiss!r}"
            )
        path = directory / FAISS_NAME
        if not path.is_file():
            raise IndexError_(f"{path}: missing; the dense index is incomplete, rebuild it")
        try:
            index = faiss.read_index(str(path))
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise IndexError_(f"{path}: corrupt FAISS index ({first}); rebuild it") from None
        if index.ntotal != manifest.n_docs or index.ntotal != len(store):
            raise IndexError_(
                f"{path}: holds {index.ntotal} vectors, the manifest says {manifest.n_docs} and the store has {len(store)}"
            )
        if index.d != manifest.params.get("dim"):
            raise IndexError_(f"{path}: {index.d}-d vectors, the manifest says {manifest.params.get('dim')}")
        if settings.dense.faiss == "hnsw":
            index.hnsw.efSearch = settings.dense.hnsw_ef_search
        return cls(store, settings, index, manifest)

    # ---------------------------------------------------------------- incremental add
    def add(self, new_docs: list["Document"], directory: Path) -> None:
        """Embed only ``new_docs`` (already at the tail of the store) and append them."""
        if not new_docs:
            return
        start = self.faiss_index.ntotal
        if start + len(new_docs) != len(self.store):
            raise ValueError(
                f"dense index holds {start} rows and got {len(new_docs)} new docs, but the store has {len(self.store)}"
            )
        for offset, doc in enumerate(new_docs):
            if self.store.row(doc.doc_id) != start + offset:
                raise ValueError(f"document {doc.doc_id} is not at the tail of the store")
        self.faiss_index.add(self.embed_documents(new_docs))
        self.manifest = self.manifest.model_copy(
            update={"corpus_hash": corpus_hash(self.store.ids()), "n_docs": self.faiss_index.ntotal}
        )
        directory = Path(directory)
        _write_faiss(self.faiss_index, directory / FAISS_NAME)
        write_manifest(directory, self.manifest)

    # ---------------------------------------------------------------- search
    def search(self, query_vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` rows per query vector: ``(scores, rows)``, each ``(n_queries, k')`` with
        ``k' = min(k, n_docs)``; FAISS pads missing results with row -1."""
        query_vectors = np.ascontiguousarray(query_vectors, dtype=np.float32)
        if query_vectors.ndim != 2 or query_vectors.shape[1] != self.faiss_index.d:
            raise ValueError(f"query vectors must be (n, {self.faiss_index.d}), got {query_vectors.shape}")
        k = min(k, self.faiss_index.ntotal)
        if query_vectors.shape[0] == 0 or k == 0:
            return np.zeros((query_vectors.shape[0], 0), np.float32), np.zeros((query_vectors.shape[0], 0), np.int64)
        scores, rows = self.faiss_index.search(query_vectors, k)
        return scores, rows

    def vectors(self) -> np.ndarray:
        """All stored passage vectors, row-aligned with the store (for graph building, analysis)."""
        return self.faiss_index.reconstruct_n(0, self.faiss_index.ntotal)
