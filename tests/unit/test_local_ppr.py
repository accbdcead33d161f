"""The local (forward-push) PPR against the exact power iteration, its locality, and its
memory-mapped CSR files."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routerag.index.local_ppr import LocalPPR, csr_from_edges, load_csr, save_csr
from routerag.index.ppr import PowerPPR
from routerag.index.vector_topk import VectorTopK, top_rows


def random_graph(rng: np.random.Generator, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Weighted edges with a few self-loops and duplicate pairs; some nodes stay without edges."""
    edges = rng.integers(0, n - n // 20, (m, 2))  # the last 5% of the nodes have no edges
    edges[:3, 1] = edges[:3, 0]  # self-loops
    edges[3:6] = edges[6:9]  # duplicates (summed)
    return edges, rng.random(m) + 0.05


def exact(n: int, edges: np.ndarray, weights: np.ndarray, damping: float, nodes: np.ndarray, w: np.ndarray) -> np.ndarray:
    reset = np.zeros(n)
    np.add.at(reset, nodes, w)
    return PowerPPR(n, edges, weights, damping, tol=1e-13, dtype=np.float64).run(reset)


def dense_local(solver: LocalPPR, nodes: np.ndarray, w: np.ndarray) -> np.ndarray:
    touched, scores = solver.run(nodes, w)
    out = np.zeros(solver.n)
    out[touched] = scores
    return out


@pytest.mark.parametrize("damping", [0.5, 0.85])
def test_local_matches_exact_on_a_random_graph(damping):
    rng = np.random.default_rng(7)
    n = 1500
    edges, weights = random_graph(rng, n, 4000)
    solver = LocalPPR.from_edges(n, edges, weights, damping, tol=1e-10)
    for _ in range(4):
        nodes = rng.choice(n, 6, replace=False)
        nodes[0] = n - 1  # a seed without edges: its mass jumps back to the reset
        w = rng.random(6) + 0.1
        reference = exact(n, edges, weights, damping, nodes, w)
        local = dense_local(solver, nodes, w)
        assert np.abs(local - reference).max() < 1e-7
        assert np.abs(local - reference).sum() < 1e-4  # all but the tiny residual left behind
        assert (local <= reference + 1e-9).all()  # push only ever moves residual into the estimate
        assert list(top_rows(local, 20)) == list(top_rows(reference, 20))
    # a coarser tolerance stays close and does less work
    fine_pushes = solver.pushes
    coarse = LocalPPR.from_edges(n, edges, weights, damping, tol=1e-4)
    local = dense_local(coarse, nodes, w)
    assert coarse.pushes < fine_pushes
    assert np.abs(local - reference).max() < 5e-3


def test_a_wrong_damping_is_caught():
    """The comparison above can fail: a solver with another damping is far from the reference."""
    rng = np.random.default_rng(3)
    n = 400
    edges, weights = random_graph(rng, n, 1200)
    nodes, w = np.array([1, 2, 3]), np.array([1.0, 0.5, 0.2])
    reference = exact(n, edges, weights, 0.5, nodes, w)
    wrong = dense_local(LocalPPR.from_edges(n, edges, weights, 0.6, tol=1e-10), nodes, w)
    assert np.abs(wrong - reference).max() > 1e-3


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 25),
    st.lists(st.tuples(st.integers(0, 24), st.integers(0, 24), st.floats(0.05, 5.0)), max_size=60),
    st.lists(st.tuples(st.integers(0, 24), st.floats(0.0, 1.0)), min_size=1, max_size=5),
    st.floats(0.1, 0.9),
)
def test_local_agrees_with_power_on_small_graphs(n, edge_list, seeds, damping):
    edges = np.asarray([(a % n, b % n) for a, b, _ in edge_list], dtype=np.int64).reshape(-1, 2)
    weights = np.asarray([x for _, _, x in edge_list])
    nodes = np.asarray([s % n for s, _ in seeds])
    w = np.asarray([x for _, x in seeds])
    w[0] += 0.5  # never all zero
    reference = exact(n, edges, weights, damping, nodes, w)
    local = dense_local(LocalPPR.from_edges(n, edges, weights, damping, tol=1e-12), nodes, w)
    np.testing.assert_allclose(local, reference, atol=1e-7)


def test_work_is_bounded_by_the_neighbourhood_not_the_graph():
    """A path 0-1-2-...: from seed 0 the mass k hops out is at most 0.5^(k+1); the pushes stop
    at the same depth whether the path has 1,000 or 100,000 nodes."""
    work = []
    for n in (1_000, 100_000):
        edges = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)
        solver = LocalPPR.from_edges(n, edges, np.ones(n - 1), 0.5, tol=1e-6)
        touched, scores = solver.run(np.array([0]), np.array([1.0]))
        assert touched.max() < 40
        work.append((solver.pushes, len(touched)))
        assert scores[0] == scores.max()
    assert work[0] == work[1]


def test_disconnected_component_is_never_touched():
    edges = np.array([[0, 1], [1, 2], [3, 4]])
    touched, scores = LocalPPR.from_edges(5, edges, np.ones(3), 0.5).run(np.array([0]), np.array([1.0]))
    assert set(touched.tolist()) == {0, 1, 2}
    assert scores.sum() == pytest.approx(1.0, abs=1e-5)


def test_csr_files_are_memory_mapped_and_give_the_same_scores(tmp_path):
    rng = np.random.default_rng(1)
    edges, weights = random_graph(rng, 300, 900)
    arrays = csr_from_edges(300, edges, weights)
    save_csr(tmp_path, *arrays)
    loaded = load_csr(tmp_path)
    assert loaded is not None and all(isinstance(a, np.memmap) for a in loaded)
    nodes, w = np.array([4, 9]), np.array([1.0, 2.0])
    a = LocalPPR(*arrays, damping=0.5, tol=1e-8).run(nodes, w)
    b = LocalPPR(*loaded, damping=0.5, tol=1e-8).run(nodes, w)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert load_csr(tmp_path / "missing") is None
    # each row's probabilities sum to 1 (or the row is empty)
    indptr, _, probs = arrays
    sums = np.add.reduceat(probs.astype(np.float64), indptr[:-1][np.diff(indptr) > 0])
    np.testing.assert_allclose(sums, 1.0, rtol=1e-6)


def test_bad_resets_are_rejected_and_the_workspace_stays_clean():
    solver = LocalPPR.from_edges(3, np.array([[0, 1]]), np.ones(1), 0.5)
    with pytest.raises(ValueError, match="sum to zero"):
        solver.run(np.array([0]), np.array([0.0]))
    with pytest.raises(ValueError, match="outside"):
        solver.run(np.array([3]), np.array([1.0]))
    with pytest.raises(ValueError, match="non-negative"):
        solver.run(np.array([0, 1]), np.array([1.0, -1.0]))
    first = solver.run(np.array([0]), np.array([1.0]))
    second = solver.run(np.array([0]), np.array([1.0]))
    np.testing.assert_array_equal(first[1], second[1])  # nothing left over from the first run


def test_ivf_search_finds_the_exact_top_on_clustered_vectors():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(40, 32))
    vectors = (centres[rng.integers(0, 40, 5000)] + 0.3 * rng.normal(size=(5000, 32))).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = vectors[:50] + 0.05 * rng.normal(size=(50, 32)).astype(np.float32)
    exact_scores, exact_rows = VectorTopK(vectors, "exact").search(queries, 5)
    ivf_scores, ivf_rows = VectorTopK(vectors, "ivf", nprobe=16).search(queries, 5)
    recall = np.mean([len(set(a) & set(b)) / 5 for a, b in zip(exact_rows.tolist(), ivf_rows.tolist())])
    assert recall >= 0.95
    same = exact_rows == ivf_rows
    np.testing.assert_allclose(ivf_scores[same], exact_scores[same], atol=1e-5)  # flat codes: exact scores
    low = VectorTopK(vectors, "exact").low(queries)
    assert (low >= (queries @ vectors.T).min(axis=1) - 1e-6).all()
