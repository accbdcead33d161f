"""The source registry, and mounting every source a bundle can serve.

Entries are classes. A class that can be mounted from an index bundle has
``from_bundle(bundle, *, name=None, profile=None) -> Source``; :data:`BUNDLE_MODES` says
which bundle components each such mode needs, so a bundle without a ``graph`` component simply
does not mount ``graph``/``hybrid``/``triples`` (and their modules are never imported).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from routerag.registry import Registry, classes_with

if TYPE_CHECKING:
    from routerag.sources.sourceset import SourceSet


class Bundle(Protocol):
    """What mounting needs of an index bundle (:class:`routerag.index.bundle.IndexBundle`: a
    structural type; the index layer sits below the sources and never imports them)."""

    def has(self, component: str) -> bool: ...

SOURCES: Registry[type] = Registry("source", classes_with())
SOURCES.register("passage", "routerag.sources.passage:PassageSource")
SOURCES.register("bm25", "routerag.sources.bm25:BM25Source")
SOURCES.register("table", "routerag.sources.table:TableSource")
SOURCES.register("graph", "routerag.sources.graph:GraphSource")
SOURCES.register("hybrid", "routerag.sources.hybrid:HybridSource")
SOURCES.register("triples", "routerag.sources.triples:TriplesSource")
SOURCES.register("remote", "routerag.sources.remote:RemoteSource")

# mode -> bundle components it needs; the order is the mounting (and display) order
BUNDLE_MODES: dict[str, tuple[str, ...]] = {
    "passage": ("dense",),
    "bm25": ("bm25",),
    "graph": ("graph",),
    "hybrid": ("graph",),
    "triples": ("graph",),
}


def source_from_bundle(mode: str, bundle: Bundle, *, name: str | None = None, profile: str | None = None):
    """Construct the registered source ``mode`` over ``bundle`` (mounted as ``name``)."""
    cls = SOURCES.get(mode)
    factory = getattr(cls, "from_bundle", None)
    if factory is None:
        raise TypeError(f"source {mode!r} ({cls.__name__}) cannot be built from an index bundle")
    return factory(bundle, name=name, profile=profile)


def mount_bundle(bundle: Bundle, modes: Sequence[str] | None = None) -> tuple["SourceSet", dict[str, str]]:
    """A SourceSet with every mode of ``modes`` (default: all of BUNDLE_MODES) that ``bundle`` can
    serve, and ``{mode: reason}`` for the ones it cannot."""
    from routerag.sources.sourceset import SourceSet

    sourceset = SourceSet()
    skipped: dict[str, str] = {}
    for mode in modes if modes is not None else list(BUNDLE_MODES):
        needed = BUNDLE_MODES.get(mode, ())
        missing = [c for c in needed if not bundle.has(c)]
        if missing:
            skipped[mode] = f"the index has no {', '.join(missing)} component"
            continue
        try:
            source = source_from_bundle(mode, bundle)
        except ImportError as exc:
            skipped[mode] = f"not available: {exc}"
            continue
        sourceset.mount(source)
    return sourceset, skipped


def bundle_sources(bundle: Bundle, modes: Sequence[str] | None = None) -> "SourceSet":
    """The sources of :func:`mount_bundle`, without the reasons for the modes it skipped."""
    return mount_bundle(bundle, modes)[0]
