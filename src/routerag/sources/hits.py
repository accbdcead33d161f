"""Turning index rows and scores into typed ``Hit``s, and the shared query checks of sources."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from routerag.index.docstore import DocStore
from routerag.sources.base import MAX_QUERY_CHARS, RetrievalError
from routerag.trace import Hit


def check_queries(queries: Sequence[str]) -> list[str]:
    """The same rules as ``RetrievalRequest`` for sources called directly."""
    queries = list(queries)
    for i, q in enumerate(queries):
        if not isinstance(q, str) or not q.strip():
            raise RetrievalError(f"query {i} is empty")
        if len(q) > MAX_QUERY_CHARS:
            raise RetrievalError(f"query {i} has {len(q)} characters; the limit is {MAX_QUERY_CHARS}")
    return queries


def check_k(k: int) -> int:
    if not isinstance(k, int) or k < 1:
        raise RetrievalError(f"k must be a positive integer, got {k!r}")
    return k


def hits_from_rows(
    store: DocStore, rows: np.ndarray, scores: np.ndarray, *, source: str, mode: str
) -> list[Hit]:
    """Hits for one query; rows < 0 (FAISS padding) are dropped, ranks are 1-based."""
    hits: list[Hit] = []
    for row, score in zip(rows.tolist(), scores.tolist()):
        if row < 0:
            continue
        doc = store.docs[row]
        hits.append(
            Hit(
                doc_id=doc.doc_id,
                title=doc.title,
                text=doc.text,
                score=float(score),
                source=source,
                mode=mode,
                rank=len(hits) + 1,
                metadata=dict(doc.metadata),
            )
        )
    return hits
