"""Personalized PageRank over an undirected weighted graph.

Two interchangeable solvers with the same result (tested to agree):

* :func:`igraph_ppr` — igraph's PRPACK solver, one reset vector at a time (the reference);
* :class:`PowerPPR` — power iteration on a sparse column-stochastic matrix, many reset vectors
  at once (one sparse-matrix x dense-matrix product per iteration), used for batched queries.

Both treat a node without edges (dangling) as jumping back according to the reset vector, and
return scores that are non-negative and sum to 1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import igraph


def _check_reset(reset: np.ndarray, n: int) -> np.ndarray:
    reset = np.asarray(reset, dtype=np.float64)
    if reset.shape[0] != n:
        raise ValueError(f"reset has {reset.shape[0]} entries for a graph of {n} nodes")
    if (reset < 0).any() or not np.isfinite(reset).all():
        raise ValueError("reset weights must be finite and non-negative")
    if (reset.sum(axis=0) <= 0).any():
        raise ValueError("reset weights sum to zero; there is nothing to personalise on")
    return reset


def igraph_ppr(graph: "igraph.Graph", reset: np.ndarray, damping: float) -> np.ndarray:
    """PPR scores of every vertex for one reset vector (edge attribute ``weight`` if present)."""
    reset = _check_reset(reset, graph.vcount())
    weights = "weight" if "weight" in graph.es.attributes() else None
    scores = graph.personalized_pagerank(
        vertices=None, directed=False, damping=damping, reset=reset.tolist(), weights=weights, implementation="prpack"
    )
    out = np.asarray(scores, dtype=np.float64)
    return out / out.sum()


class PowerPPR:
    """Batched PPR by power iteration: ``p <- (1-d) r + d (W D^-1 p + dangling(p) r)``."""

    def __init__(self, n: int, edges: np.ndarray, weights: np.ndarray, damping: float, tol: float = 1e-6, max_iter: int | None = None) -> None:
        from scipy import sparse

        if not 0 < damping < 1:
            raise ValueError(f"damping must be in (0, 1), got {damping}")
        edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
        weights = np.asarray(weights, dtype=np.float64).reshape(-1)
        if edges.shape[0] != weights.shape[0]:
            raise ValueError(f"{edges.shape[0]} edges but {weights.shape[0]} weights")
        loops = edges[:, 0] == edges[:, 1]
        rows = np.concatenate([edges[:, 0], edges[~loops, 1]])
        cols = np.concatenate([edges[:, 1], edges[~loops, 0]])
        vals = np.concatenate([weights, weights[~loops]])
        adjacency = sparse.csr_matrix((vals, (rows, cols)), shape=(n, n))
        degree = np.asarray(adjacency.sum(axis=1)).reshape(-1)
        self.dangling = degree <= 0
        self._dangling_rows = np.flatnonzero(self.dangling)
        inv = np.where(self.dangling, 0.0, 1.0 / np.where(self.dangling, 1.0, degree))
        # column j of the transition matrix spreads node j's mass over its neighbours
        self.matrix = (adjacency @ sparse.diags(inv)).tocsr()
        self.n = n
        self.damping = damping
        self.tol = tol
        # the error shrinks by a factor ``damping`` per iteration (it can oscillate on bipartite
        # graphs), so the iterations needed grow with the damping: size the cap from it
        needed = int(np.ceil(np.log(tol) / np.log(damping))) + 10
        self.max_iter = max_iter if max_iter is not None else min(10_000, max(100, needed))

    def run(self, resets: np.ndarray) -> np.ndarray:
        """``resets`` is ``(n,)`` or ``(n, batch)``; returns scores of the same shape, columns sum to 1."""
        resets = np.asarray(resets, dtype=np.float64)
        single = resets.ndim == 1
        r = _check_reset(resets[:, None] if single else resets, self.n)
        r = r / r.sum(axis=0, keepdims=True)
        p = r.copy()
        d = self.damping
        buffer = np.empty_like(r)  # in-place updates: the vector work costs as much as the product
        for _ in range(self.max_iter):
            lost = p[self._dangling_rows].sum(axis=0, keepdims=True)  # dangling mass jumps back to r
            nxt = self.matrix @ p
            nxt *= d
            np.multiply(r, (1 - d) + d * lost, out=buffer)
            nxt += buffer
            np.subtract(nxt, p, out=buffer)
            np.abs(buffer, out=buffer)
            delta = buffer.sum(axis=0).max()
            p = nxt
            if delta < self.tol:
                break
        p /= p.sum(axis=0, keepdims=True)
        return p[:, 0] if single else p
