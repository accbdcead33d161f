"""Reciprocal rank fusion: property tests (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routerag.sources.fusion import rrf
from routerag.trace import Hit


def hit(doc_id: str, source: str = "s") -> Hit:
    return Hit(doc_id=doc_id, title=doc_id, text=f"text {doc_id}", score=0.0, source=source, mode=source, rank=1)


doc_ids = st.sampled_from([f"d{i}" for i in range(12)])
ranked_list = st.lists(doc_ids, max_size=10, unique=True)
lists_strategy = st.lists(ranked_list, min_size=1, max_size=4)
ks = st.integers(min_value=0, max_value=100)


def to_hits(lists: list[list[str]]) -> list[list[Hit]]:
    return [[hit(d, source=f"s{j}") for d in ids] for j, ids in enumerate(lists)]


@settings(max_examples=150, deadline=None)
@given(lists_strategy, ks)
def test_fused_score_is_sum_of_reciprocal_ranks(lists, k):
    fused = rrf(to_hits(lists), k=k)
    expected = {}
    for ids in lists:
        for position, d in enumerate(ids, start=1):
            expected[d] = expected.get(d, 0.0) + 1.0 / (k + position)
    assert {h.doc_id for h in fused} == set(expected)
    for h in fused:
        assert h.score == pytest.approx(expected[h.doc_id])
    assert [h.rank for h in fused] == list(range(1, len(fused) + 1))
    assert all(a.score >= b.score for a, b in zip(fused, fused[1:]))


@settings(max_examples=150, deadline=None)
@given(lists_strategy, ks, st.data())
def test_improving_a_rank_never_lowers_the_fused_score(lists, k, data):
    candidates = [(j, i) for j, ids in enumerate(lists) for i in range(1, len(ids))]
    if not candidates:
        return
    j, i = data.draw(st.sampled_from(candidates))
    moved = lists[j][i]
    better = [list(ids) for ids in lists]
    better[j][i - 1], better[j][i] = better[j][i], better[j][i - 1]  # one place up
    before = {h.doc_id: h.score for h in rrf(to_hits(lists), k=k)}[moved]
    after = {h.doc_id: h.score for h in rrf(to_hits(better), k=k)}[moved]
    assert after >= before
    if k + i > 0:
        assert after > before


@settings(max_examples=100, deadline=None)
@given(lists_strategy, ks, st.randoms(use_true_random=False))
def test_order_of_lists_does_not_matter_and_is_deterministic(lists, k, rnd):
    hits = to_hits(lists)
    shuffled = list(hits)
    rnd.shuffle(shuffled)
    a, b, c = rrf(hits, k=k), rrf(shuffled, k=k), rrf(hits, k=k)
    key = lambda fused: [(h.doc_id, round(h.score, 12), h.rank) for h in fused]  # noqa: E731
    assert key(a) == key(b) == key(c)


def test_top_truncates_and_duplicates_inside_a_list_count_once():
    fused = rrf([[hit("a"), hit("a"), hit("b")], [hit("b"), hit("c")]], k=60, top=2)
    assert [h.doc_id for h in fused] == ["b", "a"]
    # the repeated "a" is skipped, but positions are list positions: b is 3rd in list 1
    assert fused[0].score == pytest.approx(1 / 63 + 1 / 61)
    assert fused[0].metadata["rrf_ranks"] == [1, 3]


def test_negative_k_is_rejected():
    with pytest.raises(ValueError, match="k must be"):
        rrf([[hit("a")]], k=-1)
