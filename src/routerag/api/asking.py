"""``ask``: one question (or a handful over one loaded strategy, :func:`open_asker`) answered by a
strategy over an index — the job of ``routerag ask`` and ``routerag demo``. The service brings its
own model (a pool) and mounted sources and builds its strategies with
:func:`~routerag.strategies.resolve.answer` and :func:`~routerag.strategies.resolve.strategy_factory`.

``on_step`` (everywhere here): called with each step as the strategy appends it to the trace
(``StrategyContext.on_step``), e.g. to stream it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from routerag.corpus.schema import Question
from routerag.run.config import RunConfig
from routerag.runtime.base import Strategy
from routerag.trace import StepObserver, Trace

INTERACTIVE_COMPONENTS: tuple[str, ...] = ("dense", "bm25", "graph")
"""The index components ``routerag ask``/``demo`` build over a dataset's corpus (every mode the
routerag strategy can route to)."""


class AskParams(BaseModel):
    """What to answer with: the strategy, its params, the model and the dataset (a ``RunConfig``;
    an ``EvalConfig`` is one), over a prebuilt index or one built over the dataset's corpus."""

    model_config = ConfigDict(extra="forbid")

    config: RunConfig = Field(default_factory=RunConfig, description="strategy, params, model, dataset, index settings")
    index_dir: Path | None = Field(None, description="a prebuilt index directory; None: index the dataset's corpus "
                                   "(components: INTERACTIVE_COMPONENTS)")
    shipped_policy: bool = Field(True, description="routerag on a bundled base runs with the policy adapter shipped for it")


@dataclass
class Asker:
    """A loaded strategy, ready for questions."""

    strategy: Strategy
    config: RunConfig
    """The configuration it runs: the model configuration with the front door's defaults applied."""
    index_dir: Path | None
    """The index it searches (None: the dataset has no corpus, or the strategy does not retrieve)."""

    def ask(self, question: str | Question) -> Trace:
        return self.strategy.run(question)



def ask_params(config: Path | None, overrides: Sequence[str] | None = (), *, index_dir: Path | None = None,
               shipped_policy: bool = True, defaults: dict[str, Any] | None = None, **fields: Any) -> AskParams:
    """``AskParams`` from a YAML file (an ``EvalConfig``'s shape, so an evaluation's configuration
    serves ``ask`` too), ``key.path=value`` overrides, then ``fields`` (the options given on the
    command line; None: not given); ``defaults`` (the command's defaults) only where the file is
    silent. The strategy's params are checked against its ``Params``."""
    from routerag.config import load_config
    from routerag.eval.config import EvalConfig

    explicit = {k: v for k, v in fields.items() if v is not None}
    cfg = load_config(EvalConfig, config, list(overrides or ()), updates=explicit, defaults=defaults)
    return AskParams(config=cfg, index_dir=index_dir, shipped_policy=shipped_policy)

def ask_questions(params: AskParams, n: int) -> list[Question]:
    """The first ``n`` questions (evenly spaced) of the configuration's dataset, gold answers
    included (``routerag demo``)."""
    from routerag.corpus.datasets import load_dataset

    return load_dataset(params.config.dataset, n_questions=n).questions


def answer_scores(answer: str, gold: list[str]) -> tuple[float, float]:
    """Exact match and token F1 of ``answer`` against the ``gold`` answers (the evaluation's metrics)."""
    from routerag.eval.metrics import exact_match, token_f1

    return exact_match(answer, gold), token_f1(answer, gold)


def open_asker(params: AskParams, *, on_step: StepObserver | None = None) -> Asker:
    """Apply the model environment, resolve the strategy (the shipped policy unless
    ``shipped_policy=False``), load or build the index, build the model. Raises a ``RouteragError``
    for an unknown name or bad params before anything is loaded."""
    from routerag.api.environment import model_environment
    from routerag.run.assemble import DatasetIndex, PrebuiltIndex, StrategyChoice, assemble

    cfg = params.config.with_environment(model_environment())
    if params.index_dir is None:
        cfg = cfg.model_copy(update={"components": list(INTERACTIVE_COMPONENTS)})
    sources = DatasetIndex(cfg) if params.index_dir is None else PrebuiltIndex(params.index_dir, cfg.modes)
    run = assemble(StrategyChoice.of(cfg, shipped_policy=params.shipped_policy), sources)
    return Asker(run.build(on_step=on_step), cfg.model_copy(update={"model": run.strategy.model}), run.index_dir)


def ask(question: str | Question, params: AskParams, *, on_step: StepObserver | None = None) -> Trace:
    """One question: :func:`open_asker` then :meth:`Asker.ask`."""
    return open_asker(params, on_step=on_step).ask(question)



