"""What an evaluation needs from an :class:`EvalConfig`: its run assembled by
:func:`routerag.run.assemble.assemble` (the sampled questions, the sources, the model), as every
other job's is, plus what only an evaluation has — a strategy factory per engine, the judge's
model, and the spec that identifies the run (its answer fingerprint, the versions). Names are
checked before anything expensive is loaded."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from routerag.config import fingerprint, fingerprint_dump
from routerag.corpus.schema import Question
from routerag.eval.config import EvalConfig
from routerag.eval.metrics import METRICS
from routerag.eval.provenance import collect_versions, files_sha256
from routerag.eval.runner import Engine, RunSpec, StrategyFactory
from routerag.process_local import ProcessLocal
from routerag.run.assemble import AssembledRun, DatasetIndex, QuestionSample, StrategyChoice, assemble
from routerag.runtime.base import Strategy
from routerag.strategies import STRATEGIES


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


def choice(config: EvalConfig) -> StrategyChoice:
    """The configuration's strategy, params and model. An evaluation runs exactly what its
    configuration names: no shipped policy is added (see ``routerag.api``)."""
    return StrategyChoice.of(config, shipped_policy=False)


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



class ConfigStrategyFactory(ProcessLocal[EvalConfig, AssembledRun]):
    """A :data:`StrategyFactory` that carries only the configuration, for ``--engine ray``: the
    first call in a process (a Ray actor) assembles the run there, as :func:`build_setup` does
    (the index from the index cache, which the driver filled; the model built), and every call
    returns a strategy over it. It pickles as the configuration alone
    (:class:`~routerag.process_local.ProcessLocal`), so each actor builds its own model and
    sources, once."""

    def _build(self) -> AssembledRun:
        return assemble(choice(self.config), DatasetIndex(self.config))

    def __call__(self) -> Strategy:
        return self.value().build()


def build_setup(config: EvalConfig, name: str, *, engine: Engine = "thread") -> EvalSetup:
    """Everything the runner needs: the run assembled (the questions sampled before the index and
    the model are built), then the judge's model and the spec. With ``engine="ray"`` the driver
    builds (or finds) the index but no model: the strategy factory is a
    :class:`ConfigStrategyFactory` and the judge's model a
    :class:`~routerag.llm.factory.DeferredModel`, both built in each Ray actor."""
    from routerag.llm.factory import DeferredModel, build_model, model_identity

    check_names(config)
    run = assemble(choice(config), DatasetIndex(config, QuestionSample(config.limit)),
                   "caller" if engine == "ray" else "build")
    assert run.dataset is not None and run.strategy.model is not None  # a DatasetIndex, an EvalConfig's model
    identity = model_identity(run.strategy.model.resolved())
    factory: StrategyFactory
    judge_model: object | None
    if engine == "ray":
        factory = ConfigStrategyFactory(config)
        judge_model = DeferredModel(config.judge_model) if config.judge_model is not None else None
    else:
        factory = run.build
        judge_model = build_model(config.judge_model) if config.judge_model is not None else None
    versions = collect_versions(model=identity, index_manifest=files_sha256(list(run.manifests)))
    spec = RunSpec(
        name=name,
        dataset=run.dataset.name,
        strategy=config.strategy,
        label=config.label,
        metrics=list(config.metrics),
        fingerprint=answer_fingerprint(config, run.strategy.params, identity, run.strategy.revision),
        versions=versions,
    )
    return EvalSetup(spec=spec, questions=run.questions, factory=factory, judge_model=judge_model)
