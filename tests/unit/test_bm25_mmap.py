"""BM25 arrays are loaded memory-mapped: same hits as the index just fitted, and a truncated
array file is still a clear error."""

from __future__ import annotations

import numpy as np
import pytest

from routerag.corpus.schema import Document
from routerag.index.bm25 import ARRAYS_DIR, BM25Index
from routerag.index.docstore import DocStore
from routerag.index.manifest import IndexLoadError
from routerag.index.settings import IndexSettings


def _store() -> DocStore:
    words = ["river", "castle", "film", "director", "queen", "album", "island", "bridge"]
    return DocStore(
        Document.make(f"Title {i}", " ".join(words[(i * j) % len(words)] for j in range(1, 6 + i % 4)) + f" item{i}")
        for i in range(60)
    )


def test_loaded_memory_mapped_with_the_same_hits(tmp_path):
    store = _store()
    built = BM25Index.build(store, tmp_path, IndexSettings())
    loaded = BM25Index.load(tmp_path, store, IndexSettings())
    assert isinstance(loaded.retriever.scores["data"], np.memmap)
    assert isinstance(loaded.retriever.scores["indices"], np.memmap)
    queries = ["castle film item7", "queen island", "bridge item42 director"]
    for (s1, r1), (s2, r2) in zip(built.search(queries, 5), loaded.search(queries, 5)):
        assert r1.tolist() == r2.tolist() and np.allclose(s1, s2)


def test_truncated_array_is_a_clear_error(tmp_path):
    store = _store()
    BM25Index.build(store, tmp_path, IndexSettings())
    data = tmp_path / ARRAYS_DIR / "data.csc.index.npy"
    data.write_bytes(data.read_bytes()[:-40])
    with pytest.raises(IndexLoadError, match=r"bm25s: corrupt BM25 arrays \(ValueError: mmap length is greater than file size\); rebuild it"):
        BM25Index.load(tmp_path, store, IndexSettings())
