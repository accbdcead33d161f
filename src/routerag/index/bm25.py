"""BM25 index over ``title\\ntext`` with bm25s. Row ``i`` is row ``i`` of the bundle's DocStore.

Files: ``bm25s/`` as written by ``bm25s.BM25.save`` (``.npy`` arrays saved with
``allow_pickle=False`` plus JSON vocabulary and parameters; loaded with ``allow_pickle=False``
and memory-mapped: the CSC score arrays are read from the page cache, only the vocabulary is in
Python objects) and ``manifest.json``. Incremental ``add`` re-tokenises and rebuilds the whole BM25 matrix:
document frequencies (IDF) change with every new document, and rebuilding 6k passages takes
about a second, so this is the honest incremental path.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from routerag.index.manifest import IndexLoadError, Manifest, read_manifest, write_manifest
from routerag.index.settings import BM25Settings, IndexSettings

if TYPE_CHECKING:
    from routerag.corpus.schema import Document
    from routerag.index.docstore import DocStore

ARRAYS_DIR = "bm25s"


def _stemmer(settings: BM25Settings) -> Callable[[list[str]], list[str]] | None:
    if not settings.stemming:
        return None
    try:
        import Stemmer  # PyStemmer
    except ImportError:
        raise IndexLoadError(
            "BM25 stemming needs the PyStemmer package: `pip install PyStemmer`, or set bm25.stemming=false"
        ) from None
    return Stemmer.Stemmer("english").stemWords


class BM25Tokenizer:
    """Lower-case word tokens, optional English stopword removal and Snowball stemming."""

    def __init__(self, settings: BM25Settings) -> None:
        self.stopwords = "en" if settings.stopwords == "en" else None
        self.stem = _stemmer(settings)

    def __call__(self, texts: Sequence[str]) -> list[list[str]]:
        import bm25s

        return bm25s.tokenize(
            list(texts), stopwords=self.stopwords, stemmer=self.stem, return_ids=False, show_progress=False
        )


def _shape_problem(retriever) -> str | None:
    """Why the loaded CSC score matrix is inconsistent, or None (cheap checks, no full scan)."""
    scores = retriever.scores
    data, indices, indptr = scores["data"], scores["indices"], scores["indptr"]
    n_terms = len(retriever.vocab_dict)
    if data.ndim != 1 or indices.ndim != 1 or indptr.ndim != 1 or len(data) != len(indices):
        return f"data has {len(data)} entries and indices {len(indices)}"
    scored_terms = n_terms - 1 if "" in retriever.vocab_dict else n_terms  # bm25s appends an unscored "" token
    if len(indptr) != scored_terms + 1:
        return f"indptr has {len(indptr)} entries for {scored_terms} vocabulary terms"
    if len(indptr) and (indptr[0] != 0 or indptr[-1] != len(data) or np.any(np.diff(indptr) < 0)):
        return "indptr is not a valid offset array"
    if len(indices) and (indices.min() < 0 or indices.max() >= scores["num_docs"]):
        return "a document index is out of range"
    if set(retriever.vocab_dict.values()) != set(range(n_terms)):
        return "vocabulary ids are not 0..n-1"
    return None


def _tokenizer_params(settings: BM25Settings) -> dict:
    return settings.model_dump()


class BM25Index:
    kind: ClassVar[str] = "bm25"

    def __init__(self, store: "DocStore", settings: IndexSettings, retriever, manifest: Manifest) -> None:
        self.store = store
        self.settings = settings
        self.retriever = retriever
        self.manifest = manifest
        self.tokenize = BM25Tokenizer(settings.bm25)

    @staticmethod
    def _fit(docs: Sequence["Document"], settings: BM25Settings):
        import bm25s

        tokens = BM25Tokenizer(settings)([d.passage for d in docs])
        retriever = bm25s.BM25(k1=settings.k1, b=settings.b, method=settings.method)
        retriever.index(tokens, show_progress=False)
        return retriever

    @staticmethod
    def _save_arrays(retriever, directory: Path) -> None:
        """Write ``bm25s/`` via a sibling temp folder and swap it in (never a half-written folder)."""
        target = directory / ARRAYS_DIR
        fresh = directory / f".{ARRAYS_DIR}.new"
        stale = directory / f".{ARRAYS_DIR}.old"
        for leftover in (fresh, stale):
            shutil.rmtree(leftover, ignore_errors=True)
        try:
            retriever.save(str(fresh), allow_pickle=False)
        except BaseException:
            shutil.rmtree(fresh, ignore_errors=True)
            raise
        if target.exists():
            target.rename(stale)
        fresh.rename(target)
        shutil.rmtree(stale, ignore_errors=True)

    def _manifest(self) -> Manifest:
        return Manifest(
            kind=self.kind,
            corpus_hash=self.store.corpus_hash(),
            n_docs=len(self.store),
            params=_tokenizer_params(self.settings.bm25),
        )

    @classmethod
    def build(cls, store: "DocStore", directory: Path, settings: IndexSettings) -> "BM25Index":
        if len(store) == 0:
            raise ValueError("cannot build a BM25 index over zero documents")
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        retriever = cls._fit(store.docs, settings.bm25)
        self = cls(store, settings, retriever, manifest=None)  # type: ignore[arg-type]
        self.manifest = self._manifest()
        cls._save_arrays(retriever, directory)
        write_manifest(directory, self.manifest)
        return self

    @classmethod
    def load(cls, directory: Path, store: "DocStore", settings: IndexSettings) -> "BM25Index":
        import bm25s

        directory = Path(directory)
        manifest = read_manifest(directory, kind=cls.kind, corpus_hash=store.corpus_hash())
        wanted = _tokenizer_params(settings.bm25)
        if manifest.params != wanted:
            raise IndexLoadError(f"{directory}: built with bm25 settings {manifest.params}, configured {wanted}")
        arrays = directory / ARRAYS_DIR
        if not arrays.is_dir():
            raise IndexLoadError(f"{arrays}: missing; the BM25 index is incomplete, rebuild it")
        try:
            # memory-mapped: the score matrix stays in the page cache, not in the process (docs/guides/scaling.md)
            retriever = bm25s.BM25.load(str(arrays), load_corpus=False, mmap=True, allow_pickle=False)
        except (OSError, ValueError, KeyError, EOFError) as exc:
            raise IndexLoadError(f"{arrays}: corrupt BM25 arrays ({type(exc).__name__}: {exc}); rebuild it") from None
        n = int(retriever.scores.get("num_docs", -1))
        if n != len(store) or n != manifest.n_docs:
            raise IndexLoadError(f"{arrays}: holds {n} documents, the manifest says {manifest.n_docs}, the store {len(store)}")
        problem = _shape_problem(retriever)
        if problem:
            raise IndexLoadError(f"{arrays}: corrupt BM25 arrays ({problem}); rebuild it")
        return cls(store, settings, retriever, manifest)

    def add(self, new_docs: list["Document"], directory: Path) -> None:
        """Rebuild BM25 over the whole store (IDF depends on every document; cheap at this scale)."""
        if not new_docs:
            return
        self.retriever = self._fit(self.store.docs, self.settings.bm25)
        self.manifest = self._manifest()
        directory = Path(directory)
        self._save_arrays(self.retriever, directory)
        write_manifest(directory, self.manifest)

    def search(self, queries: Sequence[str], k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query ``(scores, rows)`` of the top-``k`` documents with a positive BM25 score
        (a query sharing no term with the corpus gets no hits)."""
        out: list[tuple[np.ndarray, np.ndarray]] = []
        n_docs = int(self.retriever.scores["num_docs"])
        for tokens in self.tokenize(queries):
            ids = self.retriever.get_tokens_ids(tokens)
            if not ids:
                out.append((np.zeros(0, np.float32), np.zeros(0, np.int64)))
                continue
            scores = np.asarray(self.retriever.get_scores_from_ids(ids), dtype=np.float32)
            kk = min(k, n_docs)
            top = np.argpartition(-scores, kk - 1)[:kk] if kk < n_docs else np.arange(n_docs)
            top = top[np.argsort(-scores[top], kind="stable")]
            top = top[scores[top] > 0]
            out.append((scores[top], top.astype(np.int64)))
        return out
