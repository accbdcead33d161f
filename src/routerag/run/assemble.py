"""The run assembler: from a configuration to what a strategy runs on, one way for every job — a
run (``api.asking``: ``ask``, ``demo``), an evaluation (``eval.setup``, and each Ray actor of one)
and a service request (``edge.asks.Preparation``: ``/v1/ask``, chat completions, ``/v1/runs``, the
MCP ``ask`` tool). :func:`assemble` takes the same steps in the same order for each:

1. the strategy resolved (:func:`prepare_strategy`): names and params are refused before anything loads;
2. the dataset, when the sources are its index (its questions sampled first when a run answers
   them, and an empty sample refused before any index is built);
3. the sources: the dataset's index (cached under ``cache_dir("indexes")``, keyed by the corpus and
   the index settings; none for a strategy that does not retrieve), a prebuilt index, or the
   sources the caller mounts with the uploads a request names;
4. every source the given params name is mounted (and a Params model's own ``check_mounted``);
5. the model, built from the resolved configuration, or none where the caller brings its own.

What differs between the jobs are typed inputs, not steps: :class:`StrategyChoice` (with
:class:`RequestLimits` for a request), one of :data:`Sources` and :data:`ModelFrom`. Every refusal
of the strategy is a :class:`StrategyRequestError`. Training data (``train.data``) and router labels
(``train.router.labels``) mount a dataset's sources with :func:`build_sources`."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from routerag.config import fingerprint, fingerprint_dump
from routerag.corpus.datasets import DataNotFoundError, Dataset, load_dataset
from routerag.corpus.schema import Question
from routerag.errors import RouteragError
from routerag.index.settings import IndexSettings
from routerag.llm.config import ModelConfig
from routerag.paths import cache_dir
from routerag.provenance import FromRequest
from routerag.registry import UnknownNameError
from routerag.run.config import RunConfig
from routerag.sources.registry import bundle_sources
from routerag.sources.sourceset import SourceSet
from routerag.strategies.resolve import ResolvedStrategy, StrategyParamsError, param_sources, resolve_strategy, strategy_factory

if TYPE_CHECKING:
    from routerag.llm.base import ChatModel
    from routerag.runtime.base import Strategy
    from routerag.trace import StepObserver

__all__ = ["AssembledRun", "DatasetIndex", "Mounted", "ModelFrom", "PrebuiltIndex", "QuestionSample", "RequestLimits",
           "Sources", "StrategyChoice", "StrategyRequestError", "Uploads", "assemble", "build_sources",
           "dataset_sources", "index_root", "index_settings_for", "prepare_strategy"]


class StrategyRequestError(RouteragError, ValueError):
    """A configuration's strategy is refused before it runs: an unknown or unavailable strategy,
    invalid params, a source a param names that is not mounted, or a token limit above a request's."""


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
    return build_sources(load_dataset(config.dataset), config)[0]


# ------------------------------------------------------------------ the assembler's inputs
@dataclass(frozen=True)
class RequestLimits:
    """What a request may ask for (a service's, the MCP server's): its params are JSON, validated
    strictly (unknown names, ``true`` for an integer, ``"3"`` for a number), and name only what
    ``request`` allows (registered parts, the plugins the operator allowed, paths inside its data
    folder); no token limit of its params may exceed ``max_new_tokens`` (None: no cap)."""

    request: FromRequest = FromRequest()
    max_new_tokens: int | None = None


@dataclass(frozen=True)
class StrategyChoice:
    """The strategy a run answers with: its name and params, the model configuration it runs on
    (None: the caller brings its own model, so no shipped policy applies), whether the shipped
    policy applies where it fits (see ``routerag.api``'s notes; an evaluation never asks for it),
    and, for a request, its limits (None: the operator's configuration, whose values are converted
    as YAML and ``--set`` give them and may name any registered part or plugin)."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    model: ModelConfig | None = None
    shipped_policy: bool = True
    limits: RequestLimits | None = None

    @classmethod
    def of(cls, config: RunConfig, *, shipped_policy: bool) -> StrategyChoice:
        """The strategy, params and model of an operator's configuration."""
        return cls(config.strategy, config.params, config.model, shipped_policy)


@dataclass(frozen=True)
class QuestionSample:
    """The dataset questions a run answers: ``limit`` evenly spaced ones (None: all)."""

    limit: int | None


@dataclass(frozen=True)
class DatasetIndex:
    """The sources of ``config.dataset``: its cached index under ``config``'s index settings and
    components (built on first use; not at all for a strategy that does not retrieve). With
    ``questions``, the run answers a sample of the dataset's questions (an evaluation)."""

    config: RunConfig
    questions: QuestionSample | None = None


@dataclass(frozen=True)
class PrebuiltIndex:
    """The sources of the index bundle in ``path``, the modes in ``modes`` (None: every mode it serves)."""

    path: Path
    modes: list[str] | None = None


class Uploads(Protocol):
    """Where uploaded sources are mounted from (the service's ``SourceStore``); a refusal is its own error."""

    def mount(self, base: SourceSet, names: list[str]) -> SourceSet: ...


@dataclass(frozen=True)
class Mounted:
    """Sources the caller serves (``base``), plus the uploads ``names`` from ``uploads`` (None:
    the caller mounts none, and a request naming one is refused)."""

    base: SourceSet
    names: Sequence[str] = ()
    uploads: Uploads | None = None


Sources = DatasetIndex | PrebuiltIndex | Mounted
"""Where a run's sources come from."""

ModelFrom = Literal["build", "caller"]
"""``"build"``: the model is built from the resolved configuration; ``"caller"``: none is built, the
caller brings its own (a service's model pool, each Ray actor of an evaluation)."""


# ------------------------------------------------------------------ what it gives
@dataclass(frozen=True)
class AssembledRun:
    """A resolved strategy over its sources and model, and where they came from."""

    strategy: ResolvedStrategy
    sources: SourceSet
    model: ChatModel | None = None
    """The model it runs on; None when the caller brings its own (``model="caller"``)."""
    manifests: tuple[Path, ...] = ()
    """The manifests of the index the sources come from (none for mounted sources)."""
    dataset: Dataset | None = None
    """The dataset whose index the sources are (:class:`DatasetIndex`), else None."""
    questions: list[Question] = field(default_factory=list)
    """The sampled questions (:class:`DatasetIndex` with ``questions``), else empty."""

    @property
    def index_dir(self) -> Path | None:
        """The index the sources come from (a prebuilt one, or the dataset's cached one); None without one."""
        return self.manifests[0].parent if self.manifests else None

    def build(self, *, on_step: StepObserver | None = None) -> Strategy:
        """A fresh strategy over the assembled model and sources (``on_step``: as on ``StrategyContext``)."""
        if self.model is None:
            raise TypeError("assembled without a model (model='caller'): build it with strategy_factory and the caller's")
        return strategy_factory(self.strategy, self.model, self.sources, on_step=on_step)()


# ------------------------------------------------------------------ the steps
def prepare_strategy(choice: StrategyChoice) -> ResolvedStrategy:
    """Step 1: the choice resolved by :func:`~routerag.strategies.resolve.resolve_strategy` (the
    front door's defaults), validated as its limits say, every token limit within the request's cap."""
    limits = choice.limits
    try:
        resolved = resolve_strategy(choice.name, choice.params, choice.model, shipped_policy=choice.shipped_policy,
                                    json_params=limits is not None, request=limits.request if limits is not None else None)
    except (UnknownNameError, StrategyParamsError) as exc:
        raise StrategyRequestError(str(exc)) from None
    cap = limits.max_new_tokens if limits is not None else None
    if cap is not None:
        for key, value in resolved.token_limits().items():
            if value > cap:
                raise StrategyRequestError(f"params.{key}: {value} is above this service's limit of {cap} tokens")
    return resolved


def _dataset(sources: Sources) -> tuple[Dataset | None, list[Question]]:
    if not isinstance(sources, DatasetIndex):
        return None, []
    dataset = load_dataset(sources.config.dataset)
    if sources.questions is None:
        return dataset, []
    questions = dataset.sample(sources.questions.limit).questions
    if not questions:
        raise DataNotFoundError(f"dataset {sources.config.dataset!r} has no questions to answer")
    return dataset, questions


def _mount(sources: Sources, resolved: ResolvedStrategy, dataset: Dataset | None) -> tuple[SourceSet, list[Path]]:
    if isinstance(sources, DatasetIndex):
        assert dataset is not None
        return build_sources(dataset, sources.config) if resolved.retrieves else (SourceSet(), [])
    if isinstance(sources, PrebuiltIndex):
        from routerag.index.bundle import load_index

        return bundle_sources(load_index(sources.path), sources.modes), [sources.path / "manifest.json"]
    names = list(sources.names)
    if sources.uploads is not None:
        return sources.uploads.mount(sources.base, names), []
    if names:
        raise StrategyRequestError(f"sources: this server mounts no uploaded sources; mounted: "
                                   f"{', '.join(sources.base.names())}")
    return sources.base, []


def _check_mounted(resolved: ResolvedStrategy, params: Mapping[str, Any], sources: SourceSet) -> None:
    mounted = set(sources.names())
    for key, value in params.items():
        missing = [n for n in param_sources(key, value) if n not in mounted]
        if missing:
            raise StrategyRequestError(f"params.{key}: unknown source {missing[0]!r}; mounted: {', '.join(sorted(mounted))}")
    check = getattr(resolved.params, "check_mounted", None)  # params whose sources sit in a mapping
    if callable(check):
        try:
            check(mounted)
        except ValueError as exc:
            raise StrategyRequestError(f"params: {exc}") from None


def _model(resolved: ResolvedStrategy, model: ModelFrom) -> ChatModel | None:
    if model == "caller":
        return None
    if resolved.model is None:
        raise TypeError("model='build' needs a model configuration in the StrategyChoice")
    from routerag.llm.factory import build_model

    return build_model(resolved.model)


def assemble(choice: StrategyChoice, sources: Sources, model: ModelFrom = "build") -> AssembledRun:
    """``choice`` over ``sources`` on ``model``: the strategy resolved, the dataset (and its sample),
    the sources, the named sources checked, the model — in this order for every job (the module's
    notes). Refusals: :class:`StrategyRequestError` (the strategy, its params, the sources they name),
    ``DataNotFoundError`` (a dataset, or a sample without questions), the uploads' own errors."""
    resolved = prepare_strategy(choice)
    dataset, questions = _dataset(sources)
    mounted, manifests = _mount(sources, resolved, dataset)
    _check_mounted(resolved, choice.params, mounted)
    return AssembledRun(resolved, mounted, _model(resolved, model), tuple(manifests), dataset, questions)
