"""Personalized PageRank invariants, and agreement of the batched solver with igraph's PRPACK."""

from __future__ import annotations

import igraph
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routerag.index.ppr import PowerPPR, igraph_ppr


@st.composite
def graphs(draw):
    n = draw(st.integers(min_value=2, max_value=30))
    m = draw(st.integers(min_value=0, max_value=60))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), min_size=m, max_size=m))
    edges = np.asarray([(a, b) for a, b in pairs if a != b], dtype=np.int64).reshape(-1, 2)
    weights = np.asarray(draw(st.lists(st.floats(0.05, 5.0), min_size=len(edges), max_size=len(edges))))
    reset = np.asarray(draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n)))
    seed = draw(st.integers(0, n - 1))
    reset[seed] += 0.5  # never all zero
    damping = draw(st.floats(0.1, 0.9))
    return n, edges, weights, reset, damping


def to_igraph(n: int, edges: np.ndarray, weights: np.ndarray) -> igraph.Graph:
    g = igraph.Graph(n=n, edges=edges.tolist(), directed=False)
    g.es["weight"] = weights.tolist()
    return g


@settings(max_examples=80, deadline=None)
@given(graphs())
def test_scores_are_a_distribution_and_solvers_agree(case):
    n, edges, weights, reset, damping = case
    reference = igraph_ppr(to_igraph(n, edges, weights), reset, damping)
    power = PowerPPR(n, edges, weights, damping).run(reset)
    for scores in (reference, power):
        assert (scores >= 0).all()
        assert scores.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(power, reference, atol=1e-6)
    np.testing.assert_array_equal(PowerPPR(n, edges, weights, damping).run(reset), power)  # deterministic


@settings(max_examples=40, deadline=None)
@given(graphs())
def test_batched_columns_equal_single_runs(case):
    n, edges, weights, reset, damping = case
    solver = PowerPPR(n, edges, weights, damping)
    other = np.roll(reset, 1)
    batch = solver.run(np.stack([reset, other], axis=1))
    np.testing.assert_allclose(batch[:, 0], solver.run(reset), atol=2 * solver.tol)  # columns iterate until the slowest converges
    np.testing.assert_allclose(batch[:, 1], solver.run(other), atol=2 * solver.tol)  # columns iterate until the slowest converges


def test_seed_gets_more_mass_than_an_unreachable_node():
    # component {0,1,2} holds the seed; {3,4} is unreachable from it
    edges = np.array([[0, 1], [1, 2], [3, 4]])
    weights = np.ones(3)
    reset = np.array([1.0, 0, 0, 0, 0])
    for scores in (igraph_ppr(to_igraph(5, edges, weights), reset, 0.5), PowerPPR(5, edges, weights, 0.5).run(reset)):
        assert scores[0] > scores[3] and scores[3] == pytest.approx(0.0, abs=1e-12)
        assert scores[0] == scores.max()


def test_bad_reset_is_rejected():
    solver = PowerPPR(3, np.array([[0, 1]]), np.ones(1), 0.5)
    with pytest.raises(ValueError, match="sum to zero"):
        solver.run(np.zeros(3))
    with pytest.raises(ValueError, match="3 nodes"):
        solver.run(np.ones(4))
    with pytest.raises(ValueError, match="non-negative"):
        solver.run(np.array([1.0, -1.0, 0.0]))


@settings(max_examples=40, deadline=None)
@given(graphs())
def test_float32_iteration_agrees_with_float64(case):
    """The default float32 iteration returns float64 scores within 1e-6 of a float64 run, and a
    1-d reset gives the same scores as the same reset as a one-column batch."""
    n, edges, weights, reset, damping = case
    fast = PowerPPR(n, edges, weights, damping)
    exact = PowerPPR(n, edges, weights, damping, dtype=np.float64)
    single = fast.run(reset)
    assert single.dtype == np.float64 and single.shape == (n,)
    np.testing.assert_allclose(single, exact.run(reset), atol=1e-6)
    np.testing.assert_allclose(fast.run(reset[:, None])[:, 0], single, atol=1e-7)


def test_dangling_mass_returns_to_the_reset():
    # node 2 has no edges: the mass it receives from the reset jumps back by the reset
    edges, weights = np.array([[0, 1]]), np.ones(1)
    reset = np.array([0.2, 0.3, 0.5])
    reference = igraph_ppr(to_igraph(3, edges, weights), reset, 0.5)
    for dtype in (np.float32, np.float64):
        solver = PowerPPR(3, edges, weights, 0.5, dtype=dtype)
        np.testing.assert_allclose(solver.run(reset), reference, atol=1e-6)
        assert 0 < solver.iterations < solver.max_iter
