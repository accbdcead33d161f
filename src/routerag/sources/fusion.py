"""Reciprocal rank fusion (Cormack et al., 2009): ``score(d) = sum over lists of 1 / (k + rank)``.

A pure function of its inputs: the result does not depend on the order of the lists, and ties
are broken by the best rank a document reached, then by ``doc_id``.
"""

from __future__ import annotations

from collections.abc import Sequence

from routerag.trace import Hit

RRF_K = 60


def rrf(lists: Sequence[Sequence[Hit]], k: int = RRF_K, top: int | None = None) -> list[Hit]:
    """Fuse ranked hit lists by ``doc_id``. Ranks are positions in each list (1-based; a repeated
    ``doc_id`` inside one list counts once, at its first position). Each fused hit is the input hit
    with the best rank (ties: smallest ``source``, then ``mode``), with ``score`` = fused score,
    ``rank`` renumbered and ``metadata["rrf_ranks"]`` = the sorted ranks it had."""
    if k < 0:
        raise ValueError(f"rrf k must be >= 0, got {k}")
    ranks: dict[str, list[int]] = {}
    best: dict[str, tuple[int, str, str, Hit]] = {}
    for hits in lists:
        seen: set[str] = set()
        for position, hit in enumerate(hits, start=1):
            if hit.doc_id in seen:
                continue
            seen.add(hit.doc_id)
            ranks.setdefault(hit.doc_id, []).append(position)
            candidate = (position, hit.source, hit.mode, hit)
            if hit.doc_id not in best or candidate[:3] < best[hit.doc_id][:3]:
                best[hit.doc_id] = candidate
    # summed over sorted ranks, so equal rank multisets give bit-identical scores whatever the list order
    scores = {d: sum(1.0 / (k + r) for r in sorted(rs)) for d, rs in ranks.items()}
    order = sorted(scores, key=lambda d: (-scores[d], best[d][0], d))
    if top is not None:
        order = order[: max(top, 0)]
    return [
        best[d][3].model_copy(
            update={
                "score": scores[d],
                "rank": i,
                "metadata": {**best[d][3].metadata, "rrf_ranks": sorted(ranks[d])},
            }
        )
        for i, d in enumerate(order, start=1)
    ]
