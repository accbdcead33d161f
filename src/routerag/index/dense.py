"""Dense passage index: embeddings of ``title\\ntext`` in FAISS (inner product over normalised
vectors, i.e. cosine). Row ``i`` of the FAISS index is row ``i`` of the bundle's DocStore.

Files: ``faiss.index`` (``faiss.write_index``, no pickle) and ``manifest.json``; the ``ivfpq``
kind adds ``vectors.f16.npy`` and memory-maps both (see :mod:`routerag.index.ivfpq`). The embedder
is built lazily on first use, so opening an index does not load the model.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import numpy as np

from routerag.index.embedder import Embedder, EmbedderConfig, build_embedder
from routerag.index.ivfpq import Adder, add_here, write_index
from routerag.index.manifest import IndexLoadError, Manifest, read_manifest, write_manifest
from routerag.index.settings import DenseSettings, IndexSettings, IVFPQSettings

if TYPE_CHECKING:
    from routerag.corpus.schema import Document
    from routerag.index.docstore import DocStore

FAISS_NAME = "faiss.index"


def _embedder_key(config: EmbedderConfig) -> dict[str, Any]:
    """The embedder fields that change the vectors (batch size and API key do not)."""
    return config.model_dump(include={"backend", "model", "base_url", "query_prefix", "passage_prefix"})


def _dense_params(settings: DenseSettings, n_docs: int) -> dict[str, Any]:
    """What the manifest records of the dense settings: flat/hnsw as before (without the ivfpq
    block), ivfpq with every setting, the FAISS factory string and the training sample size."""
    if settings.faiss != "ivfpq":
        return settings.model_dump(exclude={"ivfpq"})
    from routerag.index.ivfpq import VECTORS_NAME

    ivfpq = settings.ivfpq
    return {
        **settings.model_dump(),
        "vectors_file": VECTORS_NAME,
        "vectors_dtype": "float16",
        "train_sample": min(ivfpq.train_size, n_docs),
    }


def _check_ivfpq(directory: Path, manifest: Manifest, settings: IVFPQSettings) -> None:
    """The configured IVF-PQ settings against the ones the index was trained with."""
    built = manifest.params.get("ivfpq")
    if not isinstance(built, dict):
        raise IndexLoadError(f"{directory}: the manifest records no ivfpq settings; rebuild the index")
    for name in IVFPQSettings.STRUCTURE:
        if built.get(name) != getattr(settings, name):
            raise IndexLoadError(
                f"{directory}: trained with ivfpq.{name}={built.get(name)!r}, configured {getattr(settings, name)!r}; "
                f"rebuild the index or drop the override (only nprobe, rescore and add_batch may change at load)"
            )
    try:
        settings.check_for(int(manifest.params.get("dim", 0)), manifest.n_docs)
    except ValueError as exc:
        raise IndexLoadError(f"{directory}: {exc}") from None


def _new_faiss(dim: int, settings: DenseSettings):
    import faiss

    if settings.faiss == "hnsw":
        index = faiss.IndexHNSWFlat(dim, settings.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = settings.hnsw_ef_construction
        index.hnsw.efSearch = settings.hnsw_ef_search
        return index
    return faiss.IndexFlatIP(dim)


class VectorShards(NamedTuple):
    """Passage vectors arriving shard by shard (rows in store order), and the embedder that made them."""

    identity: str
    dim: int
    shards: Iterable[np.ndarray]


def embedding_shards(n_docs: int, settings: DenseSettings) -> list[tuple[int, int]]:
    """The row ranges ``[start, stop)`` the dense build embeds with one ``encode`` call each:
    ``ivfpq.add_batch`` rows at a time for ``ivfpq``, the whole corpus at once for ``flat`` and
    ``hnsw``. The Ray engine embeds exactly these ranges, so its vectors are bit-identical to the
    in-process build's: a model's vector for a passage can depend on its batch-mates by ~1e-7
    (padding width, length-sorted chunks), so the ranges are part of the result."""
    step = settings.ivfpq.add_batch if settings.faiss == "ivfpq" else max(n_docs, 1)
    return [(at, min(at + step, n_docs)) for at in range(0, n_docs, step)]


def _embed_in_process(store: "DocStore", settings: DenseSettings, embedder: Embedder) -> VectorShards:
    from routerag import progress

    docs = store.docs
    ranges = embedding_shards(len(docs), settings)

    def shards() -> Iterator[np.ndarray]:
        if settings.faiss != "ivfpq":  # one call over the whole corpus, as before shards existed
            yield embedder.encode([d.passage for d in docs], is_query=False)
            return
        for start, stop in ranges:
            with progress.step(f"dense ivfpq: embedding passages {start:,}-{stop:,}"):
                yield embedder.encode([d.passage for d in docs[start:stop]], is_query=False)

    return VectorShards(embedder.identity, embedder.dim, shards())


class DenseIndex:
    """FAISS ``IndexFlatIP`` (exact), ``IndexHNSWFlat`` (approximate) or memory-mapped IVF-PQ with
    exact re-scoring (:class:`routerag.index.ivfpq.IVFPQIndex`) over passage embeddings."""

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
                    raise IndexLoadError(
                        f"embedder {embedder.identity!r} gives {embedder.dim}-d vectors; the index holds {self.faiss_index.d}-d"
                    )
                self._embedder = embedder
            return self._embedder

    def use_embedder(self, embedder: Embedder) -> None:
        """Encode with ``embedder`` (e.g. a served query encoder) instead of loading the model in
        this process; it must be the embedder the index was built with (identity and dimension)."""
        if embedder.identity != self.manifest.embedder or embedder.dim != self.faiss_index.d:
            raise IndexLoadError(
                f"embedder {embedder.identity!r} ({embedder.dim}-d) is not the one this index was built with: "
                f"{self.manifest.embedder!r} ({self.faiss_index.d}-d)"
            )
        with self._lock:
            self._embedder = embedder

    def embed_documents(self, docs: Sequence["Document"]) -> np.ndarray:
        return self.embedder.encode([d.passage for d in docs], is_query=False)

    def embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        return self.embedder.encode(list(queries), is_query=True)

    # ---------------------------------------------------------------- build / load
    @classmethod
    def build(cls, store: "DocStore", directory: Path, settings: IndexSettings,
              vectors: "VectorShards | None" = None, *, ivfpq_adder: Adder = add_here) -> "DenseIndex":
        """Embed the passages (or take ``vectors`` computed elsewhere, e.g. by the Ray engine, over
        the row ranges of :func:`embedding_shards`) and build the FAISS index and manifest;
        ``ivfpq_adder`` runs an ivfpq index's add step elsewhere (the Ray engine's actors)."""
        if len(store) == 0:
            raise ValueError("cannot build a dense index over zero documents")
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        embedder: Embedder | None = None
        if vectors is None:
            embedder = build_embedder(settings.embedder)
            vectors = _embed_in_process(store, settings.dense, embedder)
        if settings.dense.faiss == "ivfpq":
            index = cls._build_ivfpq(vectors, len(store), directory, settings.dense.ivfpq, ivfpq_adder)
        else:
            index = _new_faiss(vectors.dim, settings.dense)
            for shard in vectors.shards:
                index.add(np.ascontiguousarray(shard, dtype=np.float32))
            if index.ntotal != len(store):
                raise IndexLoadError(f"{index.ntotal} vectors embedded for {len(store)} documents")
            write_index(index, directory / FAISS_NAME)
        manifest = Manifest(
            kind=cls.kind,
            corpus_hash=store.corpus_hash(),
            n_docs=len(store),
            embedder=vectors.identity,
            params={
                "dim": vectors.dim,
                "embedder_config": _embedder_key(settings.embedder),
                **_dense_params(settings.dense, len(store)),
            },
        )
        write_manifest(directory, manifest)
        self = cls(store, settings, index, manifest)
        self._embedder = embedder
        return self

    @staticmethod
    def _build_ivfpq(vectors: "VectorShards", n: int, directory: Path, settings: IVFPQSettings,
                     adder: Adder = add_here):
        """Write the fp16 file from the vector shards, then train and add."""
        from routerag.index.ivfpq import IVFPQIndex

        try:
            settings.check_for(vectors.dim, n)
        except ValueError as exc:
            raise IndexLoadError(str(exc)) from None
        return IVFPQIndex.build(vectors.shards, n, vectors.dim, directory, settings, adder=adder)

    @classmethod
    def load(cls, directory: Path, store: "DocStore", settings: IndexSettings) -> "DenseIndex":
        directory = Path(directory)
        manifest = read_manifest(directory, kind=cls.kind, corpus_hash=store.corpus_hash())
        built_with = manifest.params.get("embedder_config")
        wanted = _embedder_key(settings.embedder)
        if built_with != wanted:
            raise IndexLoadError(
                f"{directory}: built with embedder {built_with}, configured {wanted}; rebuild or drop the override"
            )
        if manifest.params.get("faiss") != settings.dense.faiss:
            raise IndexLoadError(
                f"{directory}: a {manifest.params.get('faiss')!r} FAISS index, configured {settings.dense.faiss!r}"
            )
        path = directory / FAISS_NAME
        if not path.is_file():
            raise IndexLoadError(f"{path}: missing; the dense index is incomplete, rebuild it")
        if settings.dense.faiss == "ivfpq":
            _check_ivfpq(directory, manifest, settings.dense.ivfpq)
        try:
            index = cls._read(directory, settings.dense)
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise IndexLoadError(f"{path}: corrupt FAISS index ({first}); rebuild it") from None
        if index.ntotal != manifest.n_docs or index.ntotal != len(store):
            raise IndexLoadError(
                f"{path}: holds {index.ntotal} vectors, the manifest says {manifest.n_docs} and the store has {len(store)}"
            )
        if index.d != manifest.params.get("dim"):
            raise IndexLoadError(f"{path}: {index.d}-d vectors, the manifest says {manifest.params.get('dim')}")
        if settings.dense.faiss == "hnsw":
            index.hnsw.efSearch = settings.dense.hnsw_ef_search
        return cls(store, settings, index, manifest)

    @staticmethod
    def _read(directory: Path, settings: DenseSettings):
        import faiss

        if settings.faiss != "ivfpq":
            return faiss.read_index(str(directory / FAISS_NAME))
        from routerag.index.ivfpq import VECTORS_NAME, IVFPQIndex

        if not (directory / VECTORS_NAME).is_file():
            raise IndexLoadError(f"{directory / VECTORS_NAME}: missing; the dense index is incomplete, rebuild it")
        try:
            return IVFPQIndex.load(directory, settings.ivfpq)
        except ValueError as exc:
            raise IndexLoadError(str(exc)) from None

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
        directory = Path(directory)
        vectors = self.embed_documents(new_docs)
        if self.settings.dense.faiss == "ivfpq":  # rewrites its own files
            self.faiss_index.add(vectors, directory)
        else:
            self.faiss_index.add(vectors)
            write_index(self.faiss_index, directory / FAISS_NAME)
        self.manifest = self.manifest.model_copy(
            update={"corpus_hash": self.store.corpus_hash(), "n_docs": self.faiss_index.ntotal}
        )
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
        if self.settings.dense.faiss == "ivfpq":
            return self.faiss_index.vectors()
        return self.faiss_index.reconstruct_n(0, self.faiss_index.ntotal)
