"""``build_index``: a corpus (a file, or a registered dataset's documents) -> an index directory of
components (dense, BM25, graph), or new documents and components added to an existing one — the job
of ``routerag index``."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from routerag.errors import RouteragError

if TYPE_CHECKING:
    from routerag.corpus.schema import Document
    from routerag.index.settings import IndexSettings
    from routerag.sources.base import RetrievalRequest, RetrievalResponse

DEFAULT_COMPONENTS: tuple[str, ...] = ("dense", "bm25")


class IndexRequestError(RouteragError, ValueError):
    """An index that cannot be built as asked (no documents, the folder exists, bad settings)."""


class RetrievalRequestError(IndexRequestError):
    """A retrieval request that is invalid as given (an empty query, ``k`` out of range)."""


def retrieval_request(queries: list[str], k: int, sources: list[str]) -> RetrievalRequest:
    """A validated :class:`~routerag.sources.base.RetrievalRequest` (``routerag retrieve``); each
    reason it is refused is in the :class:`RetrievalRequestError`'s message."""
    from pydantic import ValidationError

    from routerag.sources.base import RetrievalRequest

    try:
        return RetrievalRequest(queries=queries, k=k, sources=sources)
    except ValidationError as exc:
        raise RetrievalRequestError("; ".join(err["msg"].removeprefix("Value error, ") for err in exc.errors())) from None


def retrieve(index_dir: Path, query: str, k: int, modes: Sequence[str] | None = None) -> RetrievalResponse:
    """The top ``k`` hits for ``query`` from each of ``modes`` (default: every mode the index
    mounts) — ``routerag retrieve``. An unknown mode, or a request refused as invalid, is a
    :class:`RetrievalRequestError` naming why (a mode the index cannot mount: the reason)."""
    from routerag.index.bundle import load_index
    from routerag.sources.registry import mount_bundle

    sources, unmounted = mount_bundle(load_index(index_dir))
    mounted = sources.names()
    wanted = list(modes or mounted)
    unknown = [m for m in wanted if m not in mounted]
    if unknown:
        why = "; ".join(f"{m}: {unmounted[m]}" for m in unknown if m in unmounted)
        raise RetrievalRequestError(f"unknown mode {', '.join(unknown)}; mounted: {', '.join(mounted) or '(none)'}"
                                    + (f" ({why})" if why else ""))
    return sources.retrieve(retrieval_request([query], k, wanted))


def convert_docstore(index_dir: Path, to: str) -> bool:
    """Rewrite an index's documents as ``to`` (``arrow``: one memory-mapped Arrow file; ``jsonl``);
    the components are untouched (row i stays document i). False when they are stored so already."""
    from routerag.index.bundle import convert_docstore as convert

    return convert(index_dir, to)


class VerifyResult(BaseModel):
    index: Path
    files: int  # files with a recorded size and sha256 (0: built before hashes were recorded)
    bytes_hashed: int
    seconds: float
    abandoned: list[Path] = Field(default_factory=list)  # staging folders of killed builds (the next build reclaims them)


def verify_index(index_dir: Path) -> VerifyResult:
    """Hash every file of an index (its vector files too) against the sizes and sha256 recorded
    when it was built — ``routerag verify-index``. A corrupt or missing file is an
    :class:`~routerag.index.manifest.IndexLoadError` naming it (rebuild the index)."""
    from routerag.index.bundle import verify_index as verify
    from routerag.index.staging import abandoned_around

    t0 = time.perf_counter()
    left = abandoned_around(Path(index_dir))
    files, hashed = verify(index_dir)
    return VerifyResult(index=index_dir, files=files, bytes_hashed=hashed, seconds=time.perf_counter() - t0,
                        abandoned=left)


ENGINES = ("local", "ray")


class IndexParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    corpus: str = Field(description="a corpus file (JSON, JSONL, CSV, ...) or a registered dataset name")
    out: Path = Field(description="the index directory to create (or extend with add)")
    components: list[str] = Field(default_factory=list, description="index components (default: dense, bm25)")
    config: Path | None = Field(None, description="a YAML file of IndexSettings (add: default the index's own)")
    overrides: list[str] = Field(default_factory=list, description="key.path=value overrides of IndexSettings")
    add: bool = Field(False, description="add the corpus's new documents (and new components) to an existing index")
    overwrite: bool = Field(False, description="replace an existing index directory")
    format: str = Field("auto", description="corpus file format (default: detected)")
    engine: str = Field("local", description="where dense vectors are computed: local (this process) or ray (a Ray Data pipeline)")


class IndexResult(BaseModel):
    out: Path
    documents: int  # in the index now
    components: list[str]
    seconds: float
    source: str  # what was read: the corpus file's load report or the dataset's size
    added: int | None = None  # add: new documents added (None: a fresh build)
    already: int = 0  # add: documents already indexed
    new_components: list[str] = Field(default_factory=list)  # add: components added


def build_index(params: IndexParams) -> IndexResult:
    """Build (or extend) the index. Raises a ``RouteragError`` for anything it refuses."""
    docs, source = _documents(params.corpus, params.format)
    with _refused():
        return _build(params, docs, source)


@contextmanager
def _refused() -> Iterator[None]:
    """A bundle's own refusals (``FileExistsError``, ``ValueError``) as :class:`IndexRequestError`."""
    try:
        yield
    except RouteragError:
        raise
    except (FileExistsError, ValueError) as exc:
        raise IndexRequestError(str(exc)) from None


def _build(params: IndexParams, docs: list[Document], source: str) -> IndexResult:
    from routerag.config import load_config
    from routerag.index.bundle import CONFIG_NAME, load_index
    from routerag.index.settings import IndexSettings

    t0 = time.perf_counter()
    out = params.out
    if params.engine not in ENGINES:
        raise IndexRequestError(f"unknown engine {params.engine!r}: {' or '.join(ENGINES)}")
    if params.add:
        if params.engine != "local":
            raise IndexRequestError("--add runs in this process; drop --engine (only full builds run on Ray)")
        if not out.is_dir():
            raise IndexRequestError(f"{out}: no index to add to; build it first without --add")
        settings = load_config(IndexSettings, params.config if params.config is not None else out / CONFIG_NAME,
                               params.overrides)
        bundle = load_index(out, settings)
        added = bundle.add_documents(docs)
        extra = [name for name in params.components if name not in bundle.components]
        for name in extra:
            bundle.add_component(name)
        return IndexResult(out=out, documents=len(bundle.store), components=list(bundle.components),
                           seconds=time.perf_counter() - t0, source=source, added=len(added),
                           already=len(docs) - len(added), new_components=extra)
    settings = load_config(IndexSettings, params.config, params.overrides)
    result = index_documents(docs, out, params.components or DEFAULT_COMPONENTS, settings, overwrite=params.overwrite,
                             engine=params.engine)
    return result.model_copy(update={"source": source})


def index_documents(docs: Sequence[Document], out: Path, components: Sequence[str] = DEFAULT_COMPONENTS,
                    settings: IndexSettings | None = None, *, overwrite: bool = False,
                    engine: str = "local") -> IndexResult:
    """Documents already in memory (the service's uploads) -> an index directory."""
    from routerag.index.bundle import build_index as build_bundle

    t0 = time.perf_counter()
    with _refused():
        bundle = build_bundle(docs, out, settings, components, overwrite=overwrite, engine=engine)
    return IndexResult(out=out, documents=len(bundle.store), components=list(bundle.components),
                       seconds=time.perf_counter() - t0, source=f"{len(docs)} documents")


def _documents(corpus: str, fmt: str) -> tuple[list[Document], str]:
    """A corpus file, or a registered dataset name (every document of every source it has)."""
    path = Path(corpus)
    if path.exists():
        from routerag.corpus.loaders import load_corpus

        loaded = load_corpus(path, fmt)
        return loaded.docs, loaded.report.summary()
    from routerag.corpus.datasets import load_dataset
    from routerag.registry import UnknownNameError

    try:
        dataset = load_dataset(corpus)
    except UnknownNameError as exc:
        raise IndexRequestError(f"{corpus}: no such file, and {exc}") from None
    docs = dataset.documents()
    if not docs:
        raise IndexRequestError(f"dataset {corpus!r} has no documents")
    return docs, f"dataset {dataset.name}: {len(docs)} documents"
