"""The run assembler opens a run, an evaluation and a service request the same way: the strategy
resolved first (a refusal before anything loads), then the dataset and its sample, the sources,
the check of the sources the params name, the model; every refusal of the strategy is a
``StrategyRequestError``, whichever job asked."""

from __future__ import annotations

import pytest

from routerag.corpus.datasets import DataNotFoundError, Dataset
from routerag.corpus.schema import Document, Question
from routerag.errors import RouteragError
from routerag.llm.config import ModelConfig
from routerag.run.assemble import (
    DatasetIndex,
    Mounted,
    QuestionSample,
    RequestLimits,
    Sources,
    StrategyChoice,
    StrategyRequestError,
    assemble,
)
from routerag.run.config import RunConfig
from routerag.sources.sourceset import SourceSet

pytestmark = pytest.mark.unit

SCRIPTED = ModelConfig(backend="scripted", scripted_outputs=["Lothair II"])
DATASET = Dataset(name="tiny", questions=[Question(qid=f"q{i}", question=f"question {i}", answers=["a"]) for i in range(4)],
                  corpus=[Document.make("Teutberga", "Teutberga was married to Lothair II.")])


@pytest.fixture
def steps(monkeypatch) -> list[str]:
    """The steps the assembler took, in order: the dataset loaded, the sources built."""
    taken: list[str] = []

    def load(name: str) -> Dataset:
        taken.append("dataset")
        return DATASET if name == "tiny" else Dataset(name=name, corpus=DATASET.corpus)

    def build(dataset: Dataset, config: RunConfig) -> tuple[SourceSet, list]:
        taken.append("sources")
        return SourceSet(), []

    monkeypatch.setattr("routerag.run.assemble.load_dataset", load)
    monkeypatch.setattr("routerag.run.assemble.build_sources", build)
    return taken


def jobs(config: RunConfig) -> list[tuple[StrategyChoice, Sources]]:
    """The same configuration as a run, an evaluation and a service request open it."""
    return [
        (StrategyChoice.of(config, shipped_policy=True), DatasetIndex(config)),
        (StrategyChoice.of(config, shipped_policy=False), DatasetIndex(config, QuestionSample(2))),
        (StrategyChoice(config.strategy, config.params, config.model, limits=RequestLimits()), Mounted(SourceSet())),
    ]


@pytest.mark.parametrize(("params", "reason"), [
    ({"k": 0}, "invalid params for strategy 'vanilla'"),
    ({"source": "nope"}, "params.source: unknown source 'nope'"),
])
def test_every_job_refuses_the_same_strategy_with_the_same_error(steps, params, reason) -> None:
    config = RunConfig.model_construct(dataset="tiny", strategy="vanilla", params=params, model=SCRIPTED)
    for choice, sources in jobs(config):
        with pytest.raises(StrategyRequestError, match=reason) as refused:
            assemble(choice, sources, "caller")
        assert isinstance(refused.value, RouteragError) and isinstance(refused.value, ValueError)


def test_names_and_params_are_refused_before_anything_loads(steps) -> None:
    config = RunConfig.model_construct(dataset="tiny", strategy="no-such-strategy", params={}, model=SCRIPTED)
    for choice, sources in jobs(config):
        with pytest.raises(StrategyRequestError, match="unknown strategy 'no-such-strategy'"):
            assemble(choice, sources)
    assert steps == []


def test_a_run_samples_its_questions_before_the_sources_and_builds_its_model_last(steps) -> None:
    config = RunConfig(dataset="tiny", strategy="vanilla", model=SCRIPTED)
    run = assemble(StrategyChoice.of(config, shipped_policy=False), DatasetIndex(config, QuestionSample(2)))
    assert steps == ["dataset", "sources"]
    assert run.dataset is DATASET and [q.qid for q in run.questions] == ["q0", "q2"]
    assert run.model is not None and run.build().__class__ is run.strategy.cls


def test_an_empty_sample_is_refused_before_any_index_is_built(steps) -> None:
    config = RunConfig(dataset="corpus-only", strategy="vanilla", model=SCRIPTED)
    with pytest.raises(DataNotFoundError, match="'corpus-only' has no questions"):
        assemble(StrategyChoice.of(config, shipped_policy=False), DatasetIndex(config, QuestionSample(None)))
    assert steps == ["dataset"]


def test_a_strategy_that_does_not_retrieve_gets_no_index(steps) -> None:
    config = RunConfig(dataset="tiny", strategy="direct", model=SCRIPTED)
    run = assemble(StrategyChoice.of(config, shipped_policy=True), DatasetIndex(config))
    assert steps == ["dataset"] and run.sources.names() == [] and run.index_dir is None
    assert run.build().run("Who was Teutberga married to?").answer == "Lothair II"


def test_the_callers_model_is_not_built_and_a_run_without_one_cannot_build_a_strategy(steps) -> None:
    run = assemble(StrategyChoice("direct", model=SCRIPTED), Mounted(SourceSet()), "caller")
    assert run.model is None and run.strategy.model is not None
    with pytest.raises(TypeError, match="without a model"):
        run.build()


def test_mounted_sources_without_uploads_refuse_a_named_upload() -> None:
    with pytest.raises(StrategyRequestError, match="mounts no uploaded sources"):
        assemble(StrategyChoice("direct", limits=RequestLimits()), Mounted(SourceSet(), ["notes"]), "caller")
