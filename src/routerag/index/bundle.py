"""An index directory ("bundle"): the documents plus one subdirectory per index component.

```
DIR/
  manifest.json          kind "bundle", corpus hash, components
  docs.jsonl             the DocStore (row i = FAISS row i = BM25 row i = passage node i), or
  docs.arrow             the same as one memory-mapped Arrow file (``docstore: arrow``)
  config.resolved.yaml   the IndexSettings it was built with
  dense/  bm25/  graph/  one folder per component, each with its own manifest.json
```
``build_index`` builds into a hidden sibling folder and renames it into place, so a failed
build leaves nothing behind; one killed mid-build leaves its folder, which the next build over the
same directory reclaims (:mod:`routerag.index.staging`). ``load_index`` checks every manifest before reading data.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from routerag import progress
from routerag.config import ConfigError, load_config, write_resolved
from routerag.corpus.schema import Document
from routerag.index.component import COMPONENTS, IndexComponent
from routerag.index.docstore import DOCS_NAME, STORE_FILES, DocStore
from routerag.index.manifest import IndexLoadError, Manifest, check_files, read_manifest, write_manifest
from routerag.index.settings import IndexSettings
from routerag.index.staging import staging_dir
from routerag.index.stores import open_docstore, save_docstore, stored_kind
from routerag.registry import UnknownNameError

if TYPE_CHECKING:
    from routerag.index.embedder import Embedder

BUNDLE_KIND = "bundle"
CONFIG_NAME = "config.resolved.yaml"
DEFAULT_COMPONENTS = ("dense", "bm25")


def _component_class(name: str) -> type:
    try:
        return COMPONENTS.get(name)
    except UnknownNameError as exc:
        raise IndexLoadError(str(exc)) from None
    except ImportError as exc:
        raise IndexLoadError(f"index component {name!r} is not available: {exc}") from None


class IndexBundle:
    """A loaded index directory: documents, settings and the loaded components."""

    def __init__(
        self,
        directory: Path,
        store: DocStore,
        settings: IndexSettings,
        manifest: Manifest,
        components: dict[str, IndexComponent],
    ) -> None:
        self.directory = Path(directory)
        self.store = store
        self.settings = settings
        self.manifest = manifest
        self.components = components

    # ---------------------------------------------------------------- access
    def has(self, component: str) -> bool:
        return component in self.components

    def component(self, name: str) -> Any:
        try:
            return self.components[name]
        except KeyError:
            raise IndexLoadError(
                f"{self.directory}: has no {name!r} component; it has: {', '.join(self.components) or '(none)'}"
            ) from None

    def embedder(self) -> "Embedder":
        """The query/passage embedder of this index (shared with the dense component when present)."""
        if "dense" in self.components:
            return self.components["dense"].embedder
        from routerag.index.embedder import build_embedder

        return build_embedder(self.settings.embedder)

    def __len__(self) -> int:
        return len(self.store)

    # ---------------------------------------------------------------- incremental add
    def add_documents(self, docs: Iterable[Document]) -> list[Document]:
        """Index documents not yet in the bundle (by ``doc_id``); returns those actually added.
        Each component indexes only the new ones; files are replaced atomically one by one and
        the bundle manifest is written last."""
        skipped = [c for c in self.manifest.components if c not in self.components]
        if skipped:
            raise IndexLoadError(
                f"{self.directory}: load every component before adding documents (not loaded: {', '.join(skipped)})"
            )
        new = self.store.add(docs)
        if not new:
            return []
        for name, component in self.components.items():
            component.add(new, self.directory / name)
        save_docstore(self.store, self.directory, stored_kind(self.directory) or self.settings.docstore)
        self.manifest = self.manifest.model_copy(
            update={"corpus_hash": self.store.corpus_hash(), "n_docs": len(self.store)}
        )
        write_manifest(self.directory, self.manifest, tree=False)
        return new

    def add_component(self, name: str) -> IndexComponent:
        """Build one more component over the current documents (e.g. ``graph`` on an index built
        with ``dense,bm25``); it is built in a hidden folder and renamed into place."""
        if name in self.manifest.components:
            raise IndexLoadError(f"{self.directory}: already has a {name!r} component")
        cls = _component_class(name)
        with staging_dir(self.directory, name) as staging:
            try:
                with progress.step(f"index {name}: building over {len(self.store):,} passages"):
                    component = cls.build(self.store, staging, self.settings)
                staging.rename(self.directory / name)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
        self.components[name] = component
        self.manifest = self.manifest.model_copy(update={"components": [*self.manifest.components, name]})
        write_manifest(self.directory, self.manifest, tree=False)
        return component


def _read_settings(directory: Path) -> IndexSettings:
    """The settings the index was built with: a missing, empty, truncated or unparsable file is
    an error (never the defaults, which may describe another embedder or tokenizer)."""
    import yaml

    path = directory / CONFIG_NAME
    if not path.is_file():
        raise IndexLoadError(f"{path}: missing; the index is incomplete, rebuild it")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise IndexLoadError(f"{path}: corrupt, not readable YAML ({str(exc).splitlines()[0]}); rebuild the index") from None
    if not isinstance(data, dict) or not data:
        raise IndexLoadError(f"{path}: corrupt, not the settings the index was built with; rebuild the index")
    # every section written since the first index (a later field is written only off its default)
    missing = [name for name, field in IndexSettings.model_fields.items()
               if field.json_schema_extra is None and name not in data]
    if missing:
        raise IndexLoadError(f"{path}: corrupt or truncated (no {', '.join(missing)}); rebuild the index")
    try:
        return load_config(IndexSettings, path)
    except ConfigError as exc:
        raise IndexLoadError(str(exc)) from None


ENGINES = ("local", "ray")


def _build_dense_on_ray(cls: type, store: DocStore, staging: Path, settings: IndexSettings) -> IndexComponent:
    try:
        from routerag.index.ray_build import ray_ivfpq_adder, ray_vectors, remove_shards
    except ImportError as exc:
        raise IndexLoadError(f"the ray engine needs Ray Data: pip install 'routerag[scale]' ({exc})") from None
    work = staging / ".vector-shards"
    try:
        vectors = ray_vectors(staging / DOCS_NAME, len(store), settings, work)
        return cls.build(store, staging / "dense", settings, vectors=vectors, ivfpq_adder=ray_ivfpq_adder(work / "ivfpq-parts"))
    finally:
        remove_shards(work)


def build_index(
    docs: Iterable[Document],
    directory: str | Path,
    settings: IndexSettings | None = None,
    components: Sequence[str] = DEFAULT_COMPONENTS,
    *,
    overwrite: bool = False,
    engine: str = "local",
) -> IndexBundle:
    """Build a bundle over ``docs`` (duplicate ids are kept once) into ``directory``. ``engine="ray"``
    computes the dense vectors with a Ray Data pipeline (:mod:`routerag.index.ray_build`): the same
    files, bit-identical vectors."""
    directory = Path(directory)
    settings = settings or IndexSettings()
    components = list(dict.fromkeys(components))
    if engine not in ENGINES:
        raise ValueError(f"unknown index engine {engine!r}; known: {', '.join(ENGINES)}")
    if not components:
        raise ValueError("name at least one index component")
    classes = {name: _component_class(name) for name in components}  # fail on unknown names first
    if directory.exists() and not overwrite:
        raise FileExistsError(f"{directory}: already exists; use --add to extend it or --overwrite (overwrite=True) to replace it")
    store = DocStore(docs)
    if len(store) == 0:
        raise ValueError("no documents to index")

    directory.parent.mkdir(parents=True, exist_ok=True)
    with staging_dir(directory.parent, directory.name) as staging:  # a killed build's folders are reclaimed
        try:
            save_docstore(store, staging, settings.docstore)
            write_resolved(settings, staging, CONFIG_NAME)
            built: dict[str, IndexComponent] = {}
            for name, cls in classes.items():
                with progress.step(f"index {name}: building over {len(store):,} passages"):
                    if name == "dense" and engine == "ray":
                        built[name] = _build_dense_on_ray(cls, store, staging, settings)
                    else:
                        built[name] = cls.build(store, staging / name, settings)
            manifest = Manifest(
                kind=BUNDLE_KIND,
                corpus_hash=store.corpus_hash(),
                n_docs=len(store),
                embedder=built["dense"].manifest.embedder if "dense" in built else None,
                components=list(built),
            )
            write_manifest(staging, manifest, tree=False)
            if directory.exists():  # overwrite: swap, then drop the old one
                stale = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}.old-"))
                stale.rmdir()
                directory.rename(stale)
                staging.rename(directory)
                shutil.rmtree(stale, ignore_errors=True)
            else:
                staging.rename(directory)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return IndexBundle(directory, store, settings, manifest, built)


def load_index(
    directory: str | Path,
    settings: IndexSettings | None = None,
    components: Sequence[str] | None = None,
    *,
    verify: bool = False,
) -> IndexBundle:
    """Open a bundle; ``settings`` defaults to the ones it was built with. ``components`` limits
    which components are loaded (default: all). Any mismatch raises ``IndexLoadError``. Every
    file's size, and the hash of the small ones, is checked against the manifests
    (:func:`~routerag.index.manifest.check_files`); ``verify`` hashes the large vector files too."""
    directory = Path(directory)
    if not directory.is_dir():
        raise IndexLoadError(f"{directory}: no such index directory; build it with `routerag index`")
    manifest = read_manifest(directory, kind=BUNDLE_KIND)
    settings = settings or _read_settings(directory)
    try:
        kind = stored_kind(directory)
        if kind is None:
            raise IndexLoadError(f"{directory / DOCS_NAME}: missing; the index is incomplete, rebuild it")
        store = open_docstore(directory)
    except ValueError as exc:
        raise IndexLoadError(str(exc)) from None
    except ImportError as exc:
        raise IndexLoadError(f"{directory}: its documents are an Arrow file and pyarrow is missing ({exc}); pip install pyarrow") from None
    if len(store) != manifest.n_docs or store.corpus_hash() != manifest.corpus_hash:
        name = STORE_FILES[kind]
        raise IndexLoadError(
            f"{directory / name}: does not match the manifest ({len(store)} docs vs {manifest.n_docs}); rebuild the index"
        )
    # after the readers' own checks (their errors say more); catches what they cannot see
    check_files(directory, manifest, full=verify)
    wanted = manifest.components if components is None else list(components)
    missing = [c for c in wanted if c not in manifest.components]
    if missing:
        raise IndexLoadError(
            f"{directory}: has no {', '.join(missing)} component; it has: {', '.join(manifest.components)}"
        )
    loaded: dict[str, IndexComponent] = {}
    with progress.step(f"loading the index {directory.name} ({', '.join(wanted)}; {len(store):,} passages)"):
        for name in wanted:
            sub = directory / name
            if not sub.is_dir():
                raise IndexLoadError(f"{sub}: missing; the index is incomplete, rebuild it")
            loaded[name] = _component_class(name).load(sub, store, settings)
            check_files(sub, read_manifest(sub, kind=name), full=verify, warn=False)  # the bundle said it once
    return IndexBundle(directory, store, settings, manifest, loaded)


def verify_index(directory: str | Path) -> tuple[int, int]:
    """Hash every file of the bundle and its components against the sizes and hashes recorded at
    build time; a difference is an ``IndexLoadError`` naming the corrupt file. Returns (files
    checked, bytes hashed); (0, 0) for an index built before hashes were recorded."""
    directory = Path(directory)
    if not directory.is_dir():
        raise IndexLoadError(f"{directory}: no such index directory; build it with `routerag index`")
    manifest = read_manifest(directory, kind=BUNDLE_KIND)
    files, hashed = len(manifest.files), check_files(directory, manifest, full=True)
    for name in manifest.components:
        sub = directory / name
        if not sub.is_dir():
            raise IndexLoadError(f"{sub}: missing; the index is incomplete, rebuild it")
        part = read_manifest(sub, kind=name)
        files += len(part.files)
        hashed += check_files(sub, part, full=True, warn=False)
    _read_settings(directory)
    return files, hashed


def read_bundle_manifest(directory: str | Path) -> Manifest:
    """The bundle's manifest alone (cheap: no documents or vectors are read)."""
    return read_manifest(Path(directory), kind=BUNDLE_KIND)


def cached_index(
    docs: Iterable[Document],
    directory: str | Path,
    settings: IndexSettings | None = None,
    components: Sequence[str] = DEFAULT_COMPONENTS,
) -> IndexBundle:
    """Load the bundle at ``directory``, building it first if it does not exist. Concurrent
    callers (parallel evaluation lanes over one dataset) serialise on a lock file beside it, so
    the index is built once and the others load it."""
    from routerag.paths import exclusive

    directory = Path(directory)
    with exclusive(directory.with_name(f".{directory.name}.lock")):
        if directory.is_dir():
            return load_index(directory, settings)
        return build_index(docs, directory, settings, components)


def convert_docstore(directory: str | Path, kind: str) -> bool:
    """Rewrite a bundle's documents as ``kind`` (``arrow`` or ``jsonl``), streaming (one batch of
    documents in memory), check the new file against the manifest, remove the old one and record
    the kind in ``config.resolved.yaml``. Returns ``False`` when the bundle already has ``kind``."""
    from routerag.index.docstore import iter_jsonl

    directory = Path(directory)
    manifest = read_manifest(directory, kind=BUNDLE_KIND)
    settings = _read_settings(directory)
    try:
        current = stored_kind(directory)
    except ValueError as exc:
        raise IndexLoadError(str(exc)) from None
    if current is None:
        raise IndexLoadError(f"{directory}: has no documents file; the index is incomplete, rebuild it")
    if kind not in STORE_FILES:
        raise IndexLoadError(f"unknown docstore {kind!r}; use one of {', '.join(STORE_FILES)}")
    if current == kind:
        return False
    old = directory / STORE_FILES[current]
    new = directory / STORE_FILES[kind]
    try:
        if kind == "arrow":
            from routerag.index.arrow_docstore import write_arrow

            write_arrow(lambda: iter_jsonl(old), new)
        else:
            _write_jsonl(open_docstore(directory).docs, new)
        converted = _open_kind(directory, kind)
    except (ImportError, ValueError) as exc:  # pyarrow missing; a corrupt row
        new.unlink(missing_ok=True)
        raise IndexLoadError(f"{directory}: not converted ({type(exc).__name__}: {exc})") from None
    except BaseException:
        new.unlink(missing_ok=True)
        raise
    if len(converted) != manifest.n_docs or converted.corpus_hash() != manifest.corpus_hash:
        new.unlink(missing_ok=True)
        raise IndexLoadError(f"{old}: does not match the manifest ({len(converted)} docs vs {manifest.n_docs}); not converted")
    old.unlink()
    write_resolved(settings.model_copy(update={"docstore": kind}), directory, CONFIG_NAME)
    write_manifest(directory, manifest, tree=False)  # the new files' sizes and hashes
    return True


def _open_kind(directory: Path, kind: str) -> DocStore:
    if kind == "arrow":
        from routerag.index.arrow_docstore import ArrowDocStore

        return ArrowDocStore.open(directory)
    return DocStore.load(directory)


def _write_jsonl(docs: Iterable[Document], path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as handle:
            for doc in docs:
                handle.write(doc.model_dump_json() + "\n")
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
