"""The protocol every index component implements (dense, bm25, graph, ...), and their registry.

A component lives in its own subdirectory of an index bundle, with its own ``manifest.json``
(``kind`` = the component's ``kind``). ``build`` writes a complete directory, ``load`` checks
the manifest against the bundle's documents and settings, ``add`` indexes new documents
incrementally (already indexed documents are never re-embedded / re-extracted).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

from routerag.registry import Registry, classes_with

if TYPE_CHECKING:
    from typing import Self

    from routerag.corpus.schema import Document
    from routerag.index.docstore import DocStore
    from routerag.index.settings import IndexSettings


@runtime_checkable
class IndexComponent(Protocol):
    kind: ClassVar[str]

    @classmethod
    def build(cls, store: "DocStore", directory: Path, settings: "IndexSettings") -> "Self":
        """Index every document of ``store`` into ``directory`` (created by the caller, empty)."""
        ...

    @classmethod
    def load(cls, directory: Path, store: "DocStore", settings: "IndexSettings") -> "Self":
        """Open a built component; raise ``routerag.index.manifest.IndexLoadError`` on any mismatch."""
        ...

    def add(self, new_docs: "list[Document]", directory: Path) -> None:
        """Index ``new_docs`` (already appended to the store) and persist into ``directory``."""
        ...


COMPONENTS: Registry[type] = Registry("index component", classes_with())
COMPONENTS.register("dense", "routerag.index.dense:DenseIndex")
COMPONENTS.register("bm25", "routerag.index.bm25:BM25Index")
COMPONENTS.register("graph", "routerag.index.graph:GraphIndex")
