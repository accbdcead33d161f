"""Which document store a bundle holds, opening it and writing one (``jsonl`` or ``arrow``;
see :mod:`routerag.index.docstore`). pyarrow is imported only for the Arrow store."""

from __future__ import annotations

from pathlib import Path

from routerag.config import atomic_write_text
from routerag.index.docstore import ARROW_NAME, DOCS_NAME, STORE_FILES, DocStore


def stored_kind(directory: str | Path) -> str | None:
    """``"arrow"`` or ``"jsonl"``: which document file ``directory`` holds (``None``: neither).
    Both at once is an error (a conversion that did not finish)."""
    present = [kind for kind, name in STORE_FILES.items() if (Path(directory) / name).is_file()]
    if len(present) > 1:
        raise ValueError(
            f"{directory}: holds both {DOCS_NAME} and {ARROW_NAME}; remove the one the bundle does not use "
            "(config.resolved.yaml's docstore says which) or rerun `routerag convert-docstore`"
        )
    return present[0] if present else None


def open_docstore(directory: str | Path) -> DocStore:
    """The document store of a bundle directory, by the file it holds."""
    kind = stored_kind(directory)
    if kind is None:
        raise FileNotFoundError(f"{directory}: has no {DOCS_NAME} or {ARROW_NAME}; the index is incomplete, rebuild it")
    if kind == "arrow":
        from routerag.index.arrow_docstore import ArrowDocStore

        return ArrowDocStore.open(directory)
    return DocStore.load(directory)


def save_docstore(store: DocStore, directory: str | Path, kind: str) -> None:
    """Write ``store`` into ``directory`` as ``kind`` (``jsonl`` or ``arrow``)."""
    if kind == "jsonl":
        if store.kind == "jsonl":
            store.save(directory)
            return
        text = "".join(d.model_dump_json() + "\n" for d in store.docs)
        atomic_write_text(Path(directory) / DOCS_NAME, text)
        return
    if kind != "arrow":
        raise ValueError(f"unknown docstore {kind!r}; use one of {', '.join(STORE_FILES)}")
    if store.kind == "arrow":
        store.save(directory)
        return
    from routerag.index.arrow_docstore import write_arrow

    write_arrow(lambda: iter(store.docs), Path(directory) / ARROW_NAME)
