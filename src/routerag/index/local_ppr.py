"""Local personalized PageRank: forward push over CSR arrays, work bounded by the seeds' neighbourhood.

The exact solver (:class:`routerag.index.ppr.PowerPPR`) iterates over the whole graph per query,
so its cost grows with the graph. This one computes the same PPR vector
``p = (1-d) r + d P p`` (``P = W D^-1``, a node without edges jumping back to the reset vector)
with the forward push of Andersen, Chung and Lang, frontier-synchronous so that each round is a
few numpy operations over the pushed nodes' adjacency slices:

* invariant ``p_exact = p + PPR(residual)``, starting from ``p = 0``, ``residual = r``;
* pushing node ``u`` moves ``(1-d) residual[u]`` into ``p[u]`` and spreads ``d residual[u]`` over
  ``u``'s neighbours by transition probability (to the reset vector if ``u`` has no edges);
* a round pushes every node whose residual is at least ``tol`` times its neighbour count
  (``r`` normalised to sum 1), until none is left.

Every push keeps the invariant exactly, so the only error is the residual left behind: at most
``tol * neighbours(u)`` per node, and each entry of ``p`` is low by at most the PPR of that
residual. With damping 0.5 mass more than ``k`` hops from the seeds is at most ``0.5^(k+1)``, so
the pushes stay near the seeds whatever the graph's size. Only touched nodes are read (the CSR
arrays may be ``np.load(mmap_mode="r")`` memory maps) and the two dense work vectors are reused
across queries and cleared only where they were touched.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

CSR_FILES = ("indptr", "indices", "probs")


def csr_from_edges(n: int, edges: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, indices, probs)`` of the undirected graph: row ``u`` lists ``u``'s neighbours and
    the probability ``W[u, v] / deg(u)`` of stepping to each (a self-loop counted once, as in
    :class:`~routerag.index.ppr.PowerPPR`); edges of weight <= 0 carry no mass and are dropped."""
    from scipy import sparse

    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    weights = np.asarray(weights, dtype=np.float64).reshape(-1)
    if edges.shape[0] != weights.shape[0]:
        raise ValueError(f"{edges.shape[0]} edges but {weights.shape[0]} weights")
    keep = weights > 0
    edges, weights = edges[keep], weights[keep]
    loops = edges[:, 0] == edges[:, 1]
    rows = np.concatenate([edges[:, 0], edges[~loops, 1]])
    cols = np.concatenate([edges[:, 1], edges[~loops, 0]])
    vals = np.concatenate([weights, weights[~loops]])
    adjacency = sparse.csr_matrix((vals, (rows, cols)), shape=(n, n))  # duplicates summed
    adjacency.sum_duplicates()
    adjacency.sort_indices()
    degree = np.asarray(adjacency.sum(axis=1)).reshape(-1)
    counts = np.diff(adjacency.indptr)
    probs = adjacency.data / np.repeat(np.where(degree > 0, degree, 1.0), counts)
    index_dtype = np.int32 if n < 2**31 else np.int64
    return adjacency.indptr.astype(np.int64), adjacency.indices.astype(index_dtype), probs.astype(np.float32)


def save_csr(directory: Path, indptr: np.ndarray, indices: np.ndarray, probs: np.ndarray, prefix: str = "csr_") -> None:
    """Write the three arrays as plain ``.npy`` files (memory-mappable), each atomically."""
    import os

    directory.mkdir(parents=True, exist_ok=True)
    for name, array in zip(CSR_FILES, (indptr, indices, probs)):
        path = directory / f"{prefix}{name}.npy"
        tmp = path.with_name(f".{path.name}.tmp.npy")
        try:
            np.save(tmp, np.ascontiguousarray(array), allow_pickle=False)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def load_csr(directory: Path, prefix: str = "csr_", *, mmap: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The arrays written by :func:`save_csr`, memory-mapped read-only; ``None`` if absent."""
    paths = [directory / f"{prefix}{name}.npy" for name in CSR_FILES]
    if not all(p.is_file() for p in paths):
        return None
    mode = "r" if mmap else None
    indptr, indices, probs = (np.load(p, mmap_mode=mode, allow_pickle=False) for p in paths)
    if indptr.ndim != 1 or indices.shape != probs.shape or int(indptr[-1]) != indices.shape[0]:
        raise ValueError(f"{directory}: inconsistent CSR arrays")
    return indptr, indices, probs


class _Workspace:
    """Two dense vectors (residual, estimate), all zero between queries."""

    def __init__(self, n: int) -> None:
        self.residual = np.zeros(n, dtype=np.float64)
        self.estimate = np.zeros(n, dtype=np.float64)


class LocalPPR:
    """PPR by forward push; see the module docstring. ``run`` is thread-safe (a workspace per
    concurrent call, reused afterwards)."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, probs: np.ndarray, damping: float, tol: float = 1e-6) -> None:
        if not 0 < damping < 1:
            raise ValueError(f"damping must be in (0, 1), got {damping}")
        if not tol > 0:
            raise ValueError(f"tol must be > 0, got {tol}")
        self.indptr, self.indices, self.probs = indptr, indices, probs
        self.n = int(indptr.shape[0]) - 1
        self.damping = damping
        self.tol = tol
        self._free: list[_Workspace] = []
        self._lock = threading.Lock()
        self.pushes = 0  # nodes pushed by the last run (all rounds)
        self.edges_read = 0  # adjacency entries read by the last run

    @classmethod
    def from_edges(cls, n: int, edges: np.ndarray, weights: np.ndarray, damping: float, tol: float = 1e-6) -> "LocalPPR":
        return cls(*csr_from_edges(n, edges, weights), damping=damping, tol=tol)

    def run(self, nodes: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """PPR for the reset vector with ``weights`` at ``nodes`` (zero elsewhere). Returns the
        touched nodes (sorted) and their scores; the scores sum to ``1 - residual left`` (the reset
        is normalised to 1), every other node's score is below the tolerance's bound."""
        nodes = np.asarray(nodes, dtype=np.int64).reshape(-1)
        weights = np.asarray(weights, dtype=np.float64).reshape(-1)
        if nodes.shape != weights.shape:
            raise ValueError(f"{nodes.shape[0]} nodes but {weights.shape[0]} weights")
        if len(nodes) and (nodes.min() < 0 or nodes.max() >= self.n):
            raise ValueError(f"reset nodes outside 0..{self.n - 1}")
        if not np.isfinite(weights).all() or (weights.size and weights.min() < 0):
            raise ValueError("reset weights must be finite and non-negative")
        total = float(weights.sum())
        if total <= 0:
            raise ValueError("reset weights sum to zero; there is nothing to personalise on")
        with self._lock:
            work = self._free.pop() if self._free else _Workspace(self.n)
        try:
            return self._push(work, nodes, weights / total)
        finally:
            with self._lock:
                self._free.append(work)

    def _push(self, work: _Workspace, seeds: np.ndarray, reset: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r, p = work.residual, work.estimate
        indptr, indices, probs, d = self.indptr, self.indices, self.probs, self.damping
        np.add.at(r, seeds, reset)
        seeds = _sorted_unique(seeds)
        reset_at = r[seeds].copy()  # the normalised reset on its (unique) support
        touched = [seeds]
        candidates = seeds  # may repeat a node; only the ones above the threshold are deduplicated
        pushes = edges_read = 0
        while len(candidates):
            counts = indptr[candidates + 1] - indptr[candidates]
            frontier = _sorted_unique(candidates[r[candidates] >= self.tol * np.maximum(counts, 1)])
            if not len(frontier):
                break
            starts = np.asarray(indptr[frontier])
            counts = np.asarray(indptr[frontier + 1]) - starts
            mass = r[frontier]
            r[frontier] = 0.0
            p[frontier] += (1 - d) * mass
            pushes += len(frontier)
            lost = float(mass[counts == 0].sum())  # nodes without edges jump back to the reset
            if lost:
                r[seeds] += d * lost * reset_at
            total = int(counts.sum())
            edges_read += total
            candidates = seeds if lost else np.zeros(0, np.int64)
            if total:
                # positions of every frontier node's adjacency slice, concatenated
                offsets = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(total)
                neighbours = np.asarray(indices[offsets], dtype=np.int64)
                shares = np.asarray(probs[offsets], dtype=np.float64) * np.repeat(d * mass, counts)
                np.add.at(r, neighbours, shares)
                touched.append(neighbours)
                candidates = np.concatenate([neighbours, candidates]) if lost else neighbours
        self.pushes, self.edges_read = pushes, edges_read
        out = _sorted_unique(np.concatenate(touched))
        scores = p[out].copy()
        r[out] = 0.0  # leave the workspace all zero for the next query
        p[out] = 0.0
        return out, scores


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique`` by sorting (numpy 2's hash-based unique is slower on these int arrays)."""
    if len(values) < 2:
        return values
    values = np.sort(values)
    keep = np.empty(len(values), dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]
