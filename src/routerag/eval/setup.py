"""Build what an evaluation needs from an :class:`EvalConfig`: the sampled questions, the model,
the sources (an index over the dataset's corpus, cached under ``cache_dir("indexes")``) and a
strategy factory. Names are checked before anything expensive is loaded."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from routerag.config import fingerprint_dump
from routerag.corpus.datasets import Dataset, load_dataset
from routerag.corpus.schema import Question
from routerag.eval.config import EvalConfig
from routerag.eval.metrics import METRICS
from routerag.eval.provenance import collect_versions, files_sha256, fingerprint
from routerag.eval.runner import Engine, RunSpec, StrategyFactory
from routerag.index.settings import IndexSettings
from routerag.paths import cache_dir
from routerag.process_local import ProcessLocal
from routerag.runtime.base import Strategy
from routerag.sources.registry import bundle_sources
from routerag.strategies import STRATEGIES, StrategyContext
from routerag.strategies.resolve import ResolvedStrategy, resolve_strategy


@dataclass
class EvalSetup:
    spec: RunSpec
    questions: list[Question]
    factory: StrategyFactory
    judge_model: object | None  # a ChatModel for the judge metric, if configured


def check_names(config: EvalConfig) -> type[Strategy]:
    """Fail fast (listing valid names) on an unknown strategy or metric, before the params are
    read; return the strategy class."""
    for name in config.metrics:
        METRICS.get(name)
    return STRATEGIES.get(config.strategy)


def resolve(config: EvalConfig) -> ResolvedStrategy:
    """The configuration's strategy, params and model through the front door. An evaluation runs
    exactly what its configuration names: no shipped policy is added (see ``routerag.api``)."""
    check_names(config)
    return resolve_strategy(config.strategy, config.params, config.model, shipped_policy=False)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:60] or "dataset"


def index_settings_for(dataset: Dataset, config: EvalConfig) -> IndexSettings:
    """The configured index settings, except that a dataset shipping its own OpenIE (MuSiQue's
    gpt-3.5-turbo extraction) builds its graph from it unless the configuration names an extractor."""
    graph = config.index.graph
    if dataset.openie_path is None or "extractor" in graph.model_fields_set or graph.openie_file:
        return config.index
    graph = graph.model_copy(update={"extractor": "precomputed", "openie_file": str(dataset.openie_path)})
    return config.index.model_copy(update={"graph": graph})


def _index_root(dataset: Dataset, config: EvalConfig) -> Path:
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


def build_sources(dataset: Dataset, config: EvalConfig):
    """The dataset's sources: one bundle over its corpus (all modes it can serve), or one named
    source per corpus of a multi-source dataset. Returns ``(SourceSet, manifest paths)``."""
    from routerag.sources.sourceset import SourceSet

    if not dataset.documents():
        return SourceSet(), []
    root = _index_root(dataset, config)
    if dataset.multisource:
        from routerag.sources.multi import NamedCorpus, multi_source_set

        corpora = [NamedCorpus(name=s.name, profile=s.profile, docs=s.docs) for s in dataset.sources.values()]
        sources = multi_source_set(corpora, root, config.index, mode=config.source_mode)
        return sources, [root / c.name / "manifest.json" for c in corpora]
    from routerag.index.bundle import cached_index

    settings = index_settings_for(dataset, config)
    bundle = cached_index(dataset.corpus, root, settings, config.components)
    return bundle_sources(bundle, config.modes), [root / "manifest.json"]


def fingerprint_params(params: BaseModel) -> dict:
    """The params as fingerprinted: every field, except that a field marked ``OMIT_AT_DEFAULT`` (a
    parameter added after runs were stored, whose default keeps the old behaviour) is left out
    while it has its default, so that adding it does not orphan the stored runs."""
    return fingerprint_dump(params)


def answer_fingerprint(config: EvalConfig, params: BaseModel, model_identity: str, revision: int = 0) -> str:
    """What decides the answers, hashed: the configuration but the limit (the sample is checked
    itself), the validated params, the model's identity and the strategy's code revision (only
    when non-zero, so that the fingerprints of runs before revisions existed stay valid). Params
    with a ``fingerprint_inputs()`` method add what it returns (the content hashes of files their
    settings resolve to, e.g. the learned router a default ``router_model`` picks), when non-empty."""
    payload = fingerprint_dump(config, exclude={"label", "limit", "model", "judge_model", "params"})
    payload.update(params=fingerprint_params(params), model=model_identity)
    inputs = getattr(params, "fingerprint_inputs", None)
    if callable(inputs) and (resolved := inputs()):  # files a setting names by default (a shipped router's weights)
        payload["inputs"] = resolved
    if revision:
        payload["strategy_revision"] = revision
    if config.judge_model is not None:
        from routerag.llm.factory import model_identity as identity

        payload["judge_model"] = identity(config.judge_model.resolved())
    return fingerprint(payload)


def _sources_for(resolved: ResolvedStrategy, dataset: Dataset, config: EvalConfig):
    """``(SourceSet, manifest paths)`` the strategy answers from: none for a strategy that does
    not retrieve (direct, rule: no index to build), else :func:`build_sources`."""
    if resolved.retrieves:
        return build_sources(dataset, config)
    from routerag.sources.sourceset import SourceSet

    return SourceSet(), []


class ConfigStrategyFactory(ProcessLocal[EvalConfig, tuple[ResolvedStrategy, StrategyContext]]):
    """A :data:`StrategyFactory` that carries only the configuration, for ``--engine ray``: the
    first call in a process (a Ray actor) builds the strategy's context there — the model and the
    sources, with the same code as :func:`build_setup` (the index from the index cache, which
    the driver filled) — and every call returns a strategy over that context. It pickles as the
    configuration alone (:class:`~routerag.process_local.ProcessLocal`), so each actor builds its
    own model and sources, once."""

    def _build(self) -> tuple[ResolvedStrategy, StrategyContext]:
        from routerag.llm.factory import build_model

        resolved = resolve(self.config)
        sources, _ = _sources_for(resolved, load_dataset(self.config.dataset), self.config)
        assert resolved.model is not None
        return resolved, StrategyContext(model=build_model(resolved.model), sources=sources)

    def __call__(self) -> Strategy:
        resolved, context = self.value()
        return resolved.build(context)


def build_setup(config: EvalConfig, name: str, *, engine: Engine = "thread") -> EvalSetup:
    """Everything the runner needs; the expensive parts (index, model) are built last. With
    ``engine="ray"`` the driver builds (or finds) the index but no model: the strategy factory is
    a :class:`ConfigStrategyFactory` and the judge's model a
    :class:`~routerag.llm.factory.DeferredModel`, both built in each Ray actor."""
    from routerag.llm.factory import DeferredModel, build_model, model_identity

    resolved_strategy = resolve(config)
    params = resolved_strategy.params
    dataset = load_dataset(config.dataset)
    questions = dataset.sample(config.limit).questions
    if not questions:
        raise ValueError(f"dataset {config.dataset!r} has no questions to evaluate")
    sources, manifests = _sources_for(resolved_strategy, dataset, config)
    assert resolved_strategy.model is not None
    identity = model_identity(resolved_strategy.model.resolved())
    factory: StrategyFactory
    judge_model: object | None
    if engine == "ray":
        factory = ConfigStrategyFactory(config)
        judge_model = DeferredModel(config.judge_model) if config.judge_model is not None else None
    else:
        model = build_model(resolved_strategy.model)
        judge_model = build_model(config.judge_model) if config.judge_model is not None else None

        def factory() -> Strategy:
            return resolved_strategy.build(StrategyContext(model=model, sources=sources))

    versions = collect_versions(model=identity, index_manifest=files_sha256(manifests))
    spec = RunSpec(
        name=name,
        dataset=dataset.name,
        strategy=config.strategy,
        label=config.label,
        metrics=list(config.metrics),
        fingerprint=answer_fingerprint(config, params, identity, resolved_strategy.revision),
        versions=versions,
    )
    return EvalSetup(spec=spec, questions=questions, factory=factory, judge_model=judge_model)
