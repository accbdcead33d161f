"""Turning index rows and scores into typed ``Hit``s."""

from __future__ import annotations

import numpy as np

from routerag.index.docstore import DocStore
from routerag.trace import Hit


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
