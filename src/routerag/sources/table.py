"""Table retrieval: dense search over linearised table rows (one ``Document`` per row, with the
table's title and header in its text), reported with ``mode="table"``."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from routerag.index.dense import DenseIndex
from routerag.index.docstore import DocStore
from routerag.sources.passage import PassageSource

if TYPE_CHECKING:
    from routerag.index.bundle import IndexBundle


class TableSource(PassageSource):
    default_mode: ClassVar[str] = "table"

    def __init__(
        self, dense: DenseIndex, store: DocStore, *, name: str | None = None, profile: str | None = None
    ) -> None:
        super().__init__(dense, store, name=name or "table", mode="table",
                         profile=profile or f"dense retrieval over {len(store)} linearised table rows")

    @classmethod
    def from_bundle(cls, bundle: "IndexBundle", *, name: str | None = None, profile: str | None = None) -> "TableSource":
        return cls(bundle.component("dense"), bundle.store, name=name, profile=profile)
