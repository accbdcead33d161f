"""Several named corpora as several sources (RealRoute/DeepSieve ``local``/``global``, law-med).

Each named corpus is its own small index bundle under ``ROOT/<name>/``, mounted under its name
with its profile (the text a router reads to choose a source). Any ``Source`` can be mounted
under another name with :class:`NamedSource`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, field_validator

from routerag.corpus.schema import Document
from routerag.index.docstore import DocStore
from routerag.index.manifest import IndexLoadError, corpus_hash
from routerag.index.settings import IndexSettings
from routerag.sources.base import BaseSource, QueryResult, Source

if TYPE_CHECKING:
    from routerag.index.bundle import IndexBundle
    from routerag.sources.sourceset import SourceSet

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

REALROUTE_SETS: dict[str, str] = {"2wiki": "2wikimultihopqa", "law-med": "law-med"}


class NamedCorpus(BaseModel):
    """One corpus of a multi-source setup."""

    model_config = ConfigDict(frozen=True)

    name: str
    profile: str
    docs: list[Document]

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"source name {value!r} must be 1-64 letters, digits, '_', '-', '.'")
        return value


class NamedSource(BaseSource):
    """Mount ``inner`` under ``name`` (and ``profile``); hits and results carry the new name."""

    def __init__(self, inner: Source, name: str, profile: str | None = None) -> None:
        self.inner = inner
        self.name = name
        self.mode = inner.mode
        self.profile = profile if profile is not None else inner.profile

    def _search(self, queries: list[str], k: int) -> list[QueryResult]:
        out = []
        for result in self.inner.search(queries, k):
            hits = [h.model_copy(update={"source": self.name}) for h in result.hits]
            out.append(result.model_copy(update={"source": self.name, "hits": hits}))
        return out


def open_corpus_bundle(
    corpus: NamedCorpus,
    root: str | Path,
    settings: IndexSettings | None = None,
    components: Sequence[str] = ("dense",),
    *,
    rebuild: bool = False,
) -> "IndexBundle":
    """Load ``ROOT/<name>`` if it was built over exactly these documents, else build it.
    An existing bundle over other documents is refused unless ``rebuild``."""
    from routerag.index.bundle import build_index, load_index, read_bundle_manifest
    from routerag.paths import exclusive

    directory = Path(root) / corpus.name
    with exclusive(directory.with_name(f".{directory.name}.lock")):
        if directory.exists():
            manifest = read_bundle_manifest(directory)
            same = manifest.corpus_hash == corpus_hash(DocStore(corpus.docs).ids())
            if same and all(c in manifest.components for c in components):
                return load_index(directory, settings, components)
            if not rebuild:
                raise IndexLoadError(
                    f"{directory}: built over other documents or components {manifest.components}; pass rebuild=True"
                )
        return build_index(corpus.docs, directory, settings, components, overwrite=True)


def multi_source_set(
    corpora: Sequence[NamedCorpus],
    root: str | Path,
    settings: IndexSettings | None = None,
    *,
    mode: str = "passage",
    rebuild: bool = False,
) -> "SourceSet":
    """One source per named corpus, each over its own bundle, mounted under the corpus name."""
    from routerag.sources.registry import BUNDLE_MODES, source_from_bundle
    from routerag.sources.sourceset import SourceSet

    components = BUNDLE_MODES.get(mode, ("dense",))
    names = [c.name for c in corpora]
    if len(set(names)) != len(names):
        raise ValueError(f"corpus names repeat: {names}")
    sourceset = SourceSet()
    for corpus in corpora:
        bundle = open_corpus_bundle(corpus, root, settings, components, rebuild=rebuild)
        sourceset.mount(source_from_bundle(mode, bundle, name=corpus.name, profile=corpus.profile))
    return sourceset


def realroute_corpora(name: Literal["2wiki", "law-med"], data_dir: str | Path | None = None) -> list[NamedCorpus]:
    """The RealRoute/DeepSieve ``local`` and ``global`` corpora and their profiles, read from
    ``<data>/multisource/<set>_corpus_{local,global,profiles}.json``."""
    from routerag.corpus.datasets import data_root
    from routerag.corpus.loaders import load_corpus

    if name not in REALROUTE_SETS:
        raise ValueError(f"unknown multi-source set {name!r}; valid: {', '.join(REALROUTE_SETS)}")
    folder = Path(data_dir) if data_dir is not None else data_root() / "multisource"
    prefix = REALROUTE_SETS[name]
    profiles_path = folder / f"{prefix}_corpus_profiles.json"
    try:
        profiles = json.loads(profiles_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{profiles_path}: no such profiles file") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{profiles_path}: not valid JSON: {exc}") from None
    parts = ("local", "global")
    for part in parts:
        key = f"{part}_profile"
        if not isinstance(profiles, dict) or not isinstance(profiles.get(key), str):
            raise ValueError(f"{profiles_path}: field {key!r} is missing or not a string")
    return [
        NamedCorpus(
            name=part,
            profile=profiles[f"{part}_profile"],
            docs=load_corpus(folder / f"{prefix}_corpus_{part}.json", source=part).docs,
        )
        for part in parts
    ]
