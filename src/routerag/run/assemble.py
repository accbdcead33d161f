"""From a :class:`~routerag.run.config.RunConfig` to what a strategy runs on: the dataset, its index
bundle (cached under ``cache_dir("indexes")``, keyed by the corpus and the index settings), the
sources mounted over it, the resolved strategy and the model. One implementation for every job:
``ask``/``demo`` (:func:`open_run`), evaluation (``eval.setup``), training data
(``train.data.grounding_sources``) and router labels (``train.router.labels``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from routerag.config import fingerprint, fingerprint_dump
from routerag.corpus.datasets import Dataset
from routerag.index.settings import IndexSettings
from routerag.paths import cache_dir
from routerag.run.config import RunConfig
from routerag.runtime.base import StrategyContext
from routerag.sources.registry import bundle_sources
from routerag.sources.sourceset import SourceSet
from routerag.strategies.resolve import ResolvedStrategy, resolve_strategy

if TYPE_CHECKING:
    from routerag.trace import StepObserver


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:60] or "dataset"


def index_settings_for(dataset: Dataset, config: RunConfig) -> IndexSettings:
    """The configured index settings, except that a dataset shipping its own OpenIE (MuSiQue's
    gpt-3.5-turbo extraction) builds its graph from it unless the configuration names an extractor."""
    graph = config.index.graph
    if dataset.openie_path is None or "extractor" in graph.model_fields_set or graph.openie_file:
        return config.index
    graph = graph.model_copy(update={"extractor": "precomputed", "openie_file": str(dataset.openie_path)})
    return config.index.model_copy(update={"graph": graph})


def index_root(dataset: Dataset, config: RunConfig) -> Path:
    """The cached index folder of ``dataset`` under ``config``'s index settings and components."""
    from routerag.index.manifest import corpus_hash

    docs = dataset.documents()
    key = fingerprint(
        {
            "corpus": corpus_hash(d.doc_id for d in docs),
            "sources": sorted(dataset.sources),
            "index": fingerprint_dump(index_settings_for(dataset, config)),
            "components": sorted(config.components),
            "source_mode": config.source_mode if dataset.multisource else None,
        }
    )[:12]
    return cache_dir("indexes") / f"{_slug(dataset.index_name or dataset.name)}-{key}"


def build_sources(dataset: Dataset, config: RunConfig) -> tuple[SourceSet, list[Path]]:
    """The dataset's sources: one bundle over its corpus (all modes it can serve), or one named
    source per corpus of a multi-source dataset. Returns ``(SourceSet, manifest paths)``."""
    if not dataset.documents():
        return SourceSet(), []
    root = index_root(dataset, config)
    if dataset.multisource:
        from routerag.sources.multi import NamedCorpus, multi_source_set

        corpora = [NamedCorpus(name=s.name, profile=s.profile, docs=s.docs) for s in dataset.sources.values()]
        sources = multi_source_set(corpora, root, config.index, mode=config.source_mode)
        return sources, [root / c.name / "manifest.json" for c in corpora]
    from routerag.index.bundle import cached_index

    settings = index_settings_for(dataset, config)
    bundle = cached_index(dataset.corpus, root, settings, config.components)
    return bundle_sources(bundle, config.modes), [root / "manifest.json"]


def dataset_sources(config: RunConfig) -> SourceSet:
    """The sources of ``config.dataset`` (its cached index, built on first use)."""
    from routerag.corpus.datasets import load_dataset

    return build_sources(load_dataset(config.dataset), config)[0]


def sources_for(resolved: ResolvedStrategy, dataset: Dataset, config: RunConfig) -> tuple[SourceSet, list[Path]]:
    """``(SourceSet, manifest paths)`` the strategy answers from: none for a strategy that does
    not retrieve (direct, rule: no index to build), else :func:`build_sources`."""
    if resolved.retrieves:
        return build_sources(dataset, config)
    return SourceSet(), []


def resolve_run(config: RunConfig, *, shipped_policy: bool) -> ResolvedStrategy:
    """The configuration's strategy, params and model, defaults applied (``shipped_policy``: see
    ``routerag.api``'s notes; an evaluation never asks for it)."""
    return resolve_strategy(config.strategy, config.params, config.model, shipped_policy=shipped_policy)


@dataclass(frozen=True)
class AssembledRun:
    """A resolved strategy over its model and sources."""

    resolved: ResolvedStrategy
    context: StrategyContext
    index_dir: Path | None
    """The index the sources come from (a prebuilt one, or the dataset's cached one); None without one."""


def open_run(config: RunConfig, *, shipped_policy: bool, index_dir: Path | None = None,
             on_step: StepObserver | None = None) -> AssembledRun:
    """Resolve the strategy (names and params are refused before anything loads), mount the
    sources of ``index_dir`` or of the dataset's cached index, build the model."""
    from routerag.llm.factory import build_model

    resolved = resolve_run(config, shipped_policy=shipped_policy)
    root: Path | None
    if index_dir is not None:
        from routerag.index.bundle import load_index

        sources, root = bundle_sources(load_index(index_dir), config.modes), index_dir
    else:
        from routerag.corpus.datasets import load_dataset

        sources, manifests = build_sources(load_dataset(config.dataset), config)
        root = manifests[0].parent if manifests else None
    assert resolved.model is not None
    context = StrategyContext(model=build_model(resolved.model), sources=sources, on_step=on_step, adapter=resolved.adapter)
    return AssembledRun(resolved, context, root)
