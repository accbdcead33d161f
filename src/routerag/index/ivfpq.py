"""FAISS IVF-PQ over a memory-mapped fp16 vector file: the dense index for corpora beyond RAM.

Files (beside the dense component's ``manifest.json``):

* ``vectors.f16.npy``: every passage vector as float16, row ``i`` = document ``i``; opened with
  ``np.load(mmap_mode="r")``, so it lives in the page cache, not in the process's anonymous memory.
* ``faiss.index``: ``[OPQ ->] IVF{nlist} -> PQ{m}x{nbits}`` written by ``faiss.write_index`` and
  read with ``IO_FLAG_MMAP | IO_FLAG_READ_ONLY``: the inverted lists (codes and ids) stay in the
  file; only the coarse centroids, PQ codebooks and list offsets are read into memory.

Building never holds the corpus's float32 vectors at once: vectors arrive in shards (the dense
component embeds ``add_batch`` passages at a time) and are written to the fp16 file; the
quantizers are trained on a seeded sample of that file, then the vectors are added shard by shard,
so FAISS assigns ids ``0..N-1`` in file order (row ``i`` = vector ``i`` = id ``i``).

The add step (assigning each vector to its list and encoding it: most of a large build's time,
3,151 of 4,095 s at 21M here) is pluggable (:class:`Adder`): in this process by default, or on
Ray actors (:func:`routerag.index.ray_build.ray_ivfpq_adder`), each adding ``add_batch`` rows to a
copy of the trained, empty index; the parts are merged in row order with ids offset by their first
row (:func:`merge_parts`), which gives the same index, byte for byte, as adding in one process.

Search asks FAISS for the top ``max(k, rescore)`` candidates by PQ score, then re-scores them
exactly (inner product with the stored fp16 vectors) and keeps the top ``k``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from routerag.index.settings import IVFPQSettings

VECTORS_NAME = "vectors.f16.npy"
FAISS_NAME = "faiss.index"
PAD_SCORE = np.float32(-np.finfo(np.float32).max)  # FAISS's score for missing results under METRIC_INNER_PRODUCT


def factory_string(dim: int, settings: IVFPQSettings) -> str:
    """The ``faiss.index_factory`` description of these settings at dimension ``dim``."""
    prefix = f"OPQ{settings.m}," if settings.opq else ""
    return f"{prefix}IVF{settings.nlist},PQ{settings.m}x{settings.nbits}"


def write_vectors(shards: Iterable[np.ndarray], n: int, dim: int, path: Path) -> None:
    """Write ``n`` vectors arriving in ``shards`` (float32 or float16, ``(rows, dim)``) to an fp16
    ``.npy`` at ``path`` (atomically: a temporary file renamed into place)."""
    from numpy.lib.format import open_memmap

    tmp = path.with_name(f".{path.name}.tmp")
    try:
        out = open_memmap(tmp, mode="w+", dtype=np.float16, shape=(n, dim))
        at = 0
        for shard in shards:
            shard = np.asarray(shard)
            if shard.ndim != 2 or shard.shape[1] != dim:
                raise ValueError(f"a vector shard of shape {shard.shape}, expected (rows, {dim})")
            if at + len(shard) > n:
                raise ValueError(f"more than the announced {n} vectors")
            out[at : at + len(shard)] = shard
            at += len(shard)
        if at != n:
            raise ValueError(f"{at} vectors written, {n} announced")
        out.flush()
        del out
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def open_vectors(path: Path) -> np.ndarray:
    """The fp16 vector file, memory-mapped read-only."""
    vectors = np.load(path, mmap_mode="r", allow_pickle=False)
    if vectors.dtype != np.float16 or vectors.ndim != 2:
        raise ValueError(f"{path}: {vectors.dtype} array of shape {vectors.shape}, expected float16 (n, dim)")
    _advise_random(vectors)
    return vectors


def _advise_random(vectors: np.ndarray) -> None:
    """Re-scoring reads a few hundred to a few thousand scattered rows per query: tell the kernel
    not to read ahead around each one when the file is not in the page cache (kernel behaviour;
    not measured against the default here)."""
    import mmap

    mapped = getattr(vectors, "_mmap", None)
    if mapped is not None and hasattr(mmap, "MADV_RANDOM"):
        mapped.madvise(mmap.MADV_RANDOM)


def _ivf(index):
    import faiss

    return faiss.downcast_index(faiss.extract_index_ivf(index))


def train(vectors: np.ndarray, settings: IVFPQSettings):
    """A trained, empty IVF-PQ index (inner product) for ``vectors`` (``(n, dim)``, may be a
    memory map): the quantizers learn from ``min(train_size, n)`` rows drawn with ``seed``."""
    import faiss

    n, dim = vectors.shape
    settings.check_for(dim, n)
    index = faiss.index_factory(dim, factory_string(dim, settings), faiss.METRIC_INNER_PRODUCT)
    ivf = _ivf(index)
    ivf.cp.seed = settings.seed
    ivf.pq.cp.seed = settings.seed
    ivf.do_polysemous_training = False  # the factory turns it on; it only serves Hamming pre-filtering, unused here
    size = min(settings.train_size, n)
    rng = np.random.default_rng(settings.seed)
    rows = np.sort(rng.choice(n, size=size, replace=False)) if size < n else np.arange(n)
    sample = np.ascontiguousarray(vectors[rows], dtype=np.float32)
    index.train(sample)
    return index


def add_in_batches(index, vectors: np.ndarray, batch: int, start: int = 0, stop: int | None = None) -> None:
    """Add rows ``start..stop`` of ``vectors`` to ``index`` ``batch`` rows at a time (ids follow)."""
    stop = len(vectors) if stop is None else stop
    for at in range(start, stop, batch):
        index.add(np.ascontiguousarray(vectors[at : min(at + batch, stop)], dtype=np.float32))


class Adder(Protocol):
    """Fills a trained, empty IVF-PQ ``index`` (in place) with every row of the fp16 vector file
    at ``vectors_path``, ids ``0..N-1`` in row order, ``batch`` rows per ``add`` call."""

    def __call__(self, index: Any, vectors_path: Path, batch: int) -> None: ...


def add_here(index: Any, vectors_path: Path, batch: int) -> None:
    """The default :class:`Adder`: every row, in this process."""
    add_in_batches(index, open_vectors(vectors_path), batch)


def merge_parts(index: Any, parts: Iterable[tuple[int, Any]]) -> None:
    """Merge ``(first_row, part)`` pairs into ``index`` in row order: each part is a copy of the
    same trained index holding rows ``first_row..`` (its own ids ``0..``), which the merge offsets
    by ``first_row``. The parts must follow each other without a gap: the id invariant
    (row i = vector i = id i) holds only then. Each part is emptied by the merge."""
    for first_row, part in parts:
        if first_row != index.ntotal:
            raise ValueError(f"an IVF-PQ part starting at row {first_row} follows {index.ntotal} rows; parts must be contiguous")
        index.merge_from(part, first_row)


def write_index(index, path: Path) -> None:
    """Write any FAISS index atomically (a hidden temporary file renamed into place); the dense
    index writes its flat and HNSW indexes with it too."""
    import faiss

    tmp = path.with_name(f".{path.name}.tmp")
    try:
        faiss.write_index(index, str(tmp))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_index(path: Path, *, mmap: bool = True):
    """Read an IVF-PQ index; ``mmap`` keeps the inverted lists in the file (read-only)."""
    import faiss

    flags = faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY if mmap else 0
    return faiss.read_index(str(path), flags)


class IVFPQIndex:
    """A memory-mapped IVF-PQ index and its fp16 vectors, with exact re-scoring.

    Exposes what :class:`routerag.index.dense.DenseIndex` needs of a FAISS index: ``d``,
    ``ntotal``, ``search(queries, k)``, plus ``vectors()`` and ``add``."""

    def __init__(self, index, vectors: np.ndarray, settings: IVFPQSettings, directory: Path | str = "") -> None:
        if index.ntotal != len(vectors) or index.d != vectors.shape[1]:
            raise ValueError(
                f"{directory}: the IVF-PQ index holds {index.ntotal} {index.d}-d vectors, "
                f"{VECTORS_NAME} {len(vectors)} {vectors.shape[1]}-d"
            )
        self.index = index
        self.vectors16 = vectors
        self.settings = settings
        _ivf(index).nprobe = settings.nprobe

    @property
    def d(self) -> int:
        return int(self.index.d)

    @property
    def ntotal(self) -> int:
        return int(self.index.ntotal)

    # ---------------------------------------------------------------- build / load
    @classmethod
    def build(cls, shards: Iterable[np.ndarray], n: int, dim: int, directory: Path, settings: IVFPQSettings,
              *, adder: Adder = add_here) -> IVFPQIndex:
        """Write the fp16 vectors from ``shards``, train on a sample, add shard by shard (with
        ``adder``: here, or on Ray actors), write the index and reopen both memory-mapped."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        settings.check_for(dim, n)  # before any shard is embedded
        write_vectors(shards, n, dim, directory / VECTORS_NAME)
        vectors = open_vectors(directory / VECTORS_NAME)
        index = train(vectors, settings)
        del vectors
        adder(index, directory / VECTORS_NAME, settings.add_batch)
        if index.ntotal != n:
            raise RuntimeError(f"the IVF-PQ add step left {index.ntotal} vectors in the index, expected {n}")
        write_index(index, directory / FAISS_NAME)
        del index
        return cls.load(directory, settings)

    @classmethod
    def load(cls, directory: Path, settings: IVFPQSettings, *, mmap: bool = True) -> IVFPQIndex:
        directory = Path(directory)
        vectors = open_vectors(directory / VECTORS_NAME)
        return cls(read_index(directory / FAISS_NAME, mmap=mmap), vectors, settings, directory)

    def add(self, new: np.ndarray, directory: Path) -> None:
        """Append vectors (rows ``ntotal..``) to the index in ``directory`` (where it lives now):
        rewrite the fp16 file with them at the tail, add them to an in-memory copy of the index,
        write it, and reopen both memory-mapped."""
        directory = Path(directory)
        new = np.asarray(new)
        if new.ndim != 2 or new.shape[1] != self.d:
            raise ValueError(f"new vectors must be (n, {self.d}), got {new.shape}")
        old = self.vectors16
        n_old = len(old)
        step = self.settings.add_batch
        shards = [old[at : at + step] for at in range(0, n_old, step)] + [new]
        # the old file stays mapped until it is replaced: write beside it, then swap
        write_vectors(shards, n_old + len(new), self.d, directory / VECTORS_NAME)
        index = read_index(directory / FAISS_NAME, mmap=False)
        index.add(np.ascontiguousarray(new, dtype=np.float32))
        write_index(index, directory / FAISS_NAME)
        del index
        reopened = IVFPQIndex.load(directory, self.settings)
        self.index, self.vectors16 = reopened.index, reopened.vectors16

    # ---------------------------------------------------------------- search
    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(scores, rows)`` of the top ``k`` per query: PQ candidates, re-scored exactly."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        r = self.settings.rescore
        fetch = min(max(k, r), self.ntotal)
        scores, rows = self.index.search(queries, fetch)
        if r == 0:
            return scores[:, :k], rows[:, :k]
        return rescore(self.vectors16, queries, rows, k)

    def vectors(self) -> np.ndarray:
        return np.asarray(self.vectors16, dtype=np.float32)


def rescore(vectors16: np.ndarray, queries: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact inner products of ``queries`` with their candidate ``rows`` (``-1`` = none) read from
    ``vectors16``; the top ``k`` per query, padded FAISS-style (row -1, score -FLT_MAX)."""
    n_queries, fetch = rows.shape
    valid = rows >= 0
    flat = np.where(valid, rows, 0).ravel()
    order = np.argsort(flat, kind="stable")  # read the memory map in file order
    gathered = np.empty((flat.size, vectors16.shape[1]), dtype=np.float32)
    gathered[order] = vectors16[flat[order]]
    exact = np.einsum("qcd,qd->qc", gathered.reshape(n_queries, fetch, -1), queries)
    exact = np.where(valid, exact, -np.inf)
    k = min(k, fetch)
    top = np.argsort(-exact, axis=1, kind="stable")[:, :k]
    out_rows = np.take_along_axis(rows, top, axis=1)
    out_scores = np.take_along_axis(exact, top, axis=1).astype(np.float32)
    missing = ~np.take_along_axis(valid, top, axis=1)
    out_rows[missing] = -1
    out_scores[missing] = PAD_SCORE
    return out_scores, out_rows
