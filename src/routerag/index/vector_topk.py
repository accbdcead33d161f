"""Top-k inner products of query vectors against a fixed matrix (the graph's fact or passage
vectors), exact or through a FAISS IVF-Flat index, plus the cheap estimate of each query's
lowest score that min-max normalisation needs.

* ``exact``: one product with every row, then the top ``k`` (ties: lower row first) — what the
  graph source always did.
* ``ivf``: ``IndexIVFFlat`` with about ``sqrt(N)`` lists trained (FAISS k-means, fixed seed) on a
  strided sample of the rows, searched over ``nprobe`` lists. The scores it returns are exact inner
  products (flat codes), only the candidate set is approximate. Built in memory at first use.

:meth:`VectorTopK.low` is the minimum score over a strided sample of at most ``LOW_SAMPLE``
rows: every row when the matrix is that small, an upper bound of the true minimum otherwise
(the graph's normalisation then gives the low-scored candidates slightly less weight).
"""

from __future__ import annotations

import threading
from typing import Any, Literal

import numpy as np

LOW_SAMPLE = 4096
TRAIN_PER_LIST = 64  # training points per inverted list (FAISS warns below 39)


def strided(n: int, at_most: int) -> np.ndarray:
    """At most ``at_most`` row ids spread evenly over ``0..n-1`` (all of them if ``n`` is smaller)."""
    if n <= at_most:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, at_most).astype(np.int64))


def top_rows(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest entries of a 1-d array, best first (ties: lower index first)."""
    k = min(k, scores.shape[0])
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    part = np.argpartition(-scores, k - 1)[:k] if k < scores.shape[0] else np.arange(scores.shape[0])
    return part[np.lexsort((part, -scores[part]))]


class VectorTopK:
    """See the module docstring. ``vectors`` are ``(N, dim)`` float32, L2-normalised."""

    def __init__(self, vectors: np.ndarray, kind: Literal["exact", "ivf"] = "exact", nprobe: int = 16) -> None:
        if kind not in ("exact", "ivf"):
            raise ValueError(f"unknown vector search {kind!r}; use exact or ivf")
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.kind = kind
        self.nprobe = nprobe
        self._sample = self.vectors[strided(len(self.vectors), LOW_SAMPLE)]
        self._index: Any = None
        self._lock = threading.Lock()

    @property
    def n(self) -> int:
        return int(self.vectors.shape[0])

    def low(self, queries: np.ndarray) -> np.ndarray:
        """``(B,)``: each query's minimum score over the sample (exact when ``N <= LOW_SAMPLE``)."""
        if self.n == 0:
            return np.zeros(len(queries))
        return (queries @ self._sample.T).min(axis=1).astype(np.float64)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(scores, rows)``, each ``(B, min(k, N))``, best first; the ``ivf`` kind may return fewer
        real rows (padding: row ``-1``, score ``-inf``) when the probed lists hold fewer than ``k``."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        k = min(k, self.n)
        if k <= 0:
            return np.zeros((len(queries), 0), np.float32), np.zeros((len(queries), 0), np.int64)
        if self.kind == "exact":
            scores = queries @ self.vectors.T
            rows = np.stack([top_rows(row, k) for row in scores])
            return np.take_along_axis(scores, rows, axis=1), rows
        scores, rows = self.index.search(queries, k)
        rows = rows.astype(np.int64)
        scores = np.where(rows >= 0, scores, -np.inf).astype(np.float32)
        order = np.lexsort((np.where(rows >= 0, rows, np.iinfo(np.int64).max), -scores), axis=1)  # ties: lower row
        return np.take_along_axis(scores, order, axis=1), np.take_along_axis(rows, order, axis=1)

    @property
    def index(self) -> Any:
        with self._lock:
            if self._index is None:
                self._index = self._build()
            return self._index

    def _build(self) -> Any:
        import faiss

        dim = self.vectors.shape[1]
        nlist = max(1, int(np.sqrt(self.n)))
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        index.cp.seed = 1234
        index.train(self.vectors[strided(self.n, nlist * TRAIN_PER_LIST)])
        index.add(self.vectors)
        index.nprobe = min(self.nprobe, nlist)
        return index
