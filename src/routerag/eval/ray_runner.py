"""The Ray Data engine of the evaluation runner (``routerag eval --engine ray``).

It only answers questions; the run itself — the run directory, the fingerprint and sample checks,
recovery of a crash-cut log, skipping what is answered, the one writer of ``results.jsonl``, the
summary — stays in :func:`routerag.eval.runner.run_evaluation`, which calls :func:`run_on_ray`
with the questions left to answer and its ``finish`` (append one record). So the records have
the thread pool's schema and a run resumes with either engine.

The pipeline: the questions left (sample position + the question as JSON, in the runner's order)
become a Ray Dataset of one block per ``batch_size`` questions -> ``map_batches`` on a fixed pool
of ``actors`` actors (:class:`AnswerBatches`, ``actor_cpus`` CPUs each), each of which builds its
strategy once from the pickled strategy factory (``routerag eval`` sends a
:class:`~routerag.eval.setup.ConfigStrategyFactory`: the model and the sources are built in the
actor, from the configuration) and answers its batches with the runner's ``answer``
(``evaluate_question`` with the run's metrics and judge) -> the records, as JSON, stream back to
the driver in completion order (``iter_rows``), which writes each as it arrives. Actors never see
the run directory.

Ray is joined by :func:`routerag.raycluster.ensure_ray`: the cluster named by ``RAY_ADDRESS``,
else a local Ray. Each actor gets the driver's ``ROUTERAG_*`` environment variables (the cache
home, data folder, model settings) and, when that folder exists on its node, the driver's working
directory (relative dataset and index paths).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

from routerag.corpus.schema import Question
from routerag.eval.runs import QuestionRecord
from routerag.raycluster import ensure_ray
from routerag.runtime.base import Strategy

ENV_PREFIX = "ROUTERAG_"


def driver_environment() -> dict[str, str]:
    """The ``ROUTERAG_*`` variables of this process, for the actors."""
    return {key: value for key, value in os.environ.items() if key.startswith(ENV_PREFIX)}


class AnswerBatches:
    """The Ray Data actor: builds one strategy (``strategy_factory()``), then answers each batch
    of questions with it and returns their records as JSON."""

    def __init__(
        self,
        strategy_factory: Callable[[], Strategy],
        answer: Callable[[Strategy, Question, int], QuestionRecord],
        environment: dict[str, str],
        cwd: str,
    ) -> None:
        os.environ.update(environment)
        if os.path.isdir(cwd) and os.getcwd() != cwd:
            os.chdir(cwd)
        self.strategy = strategy_factory()
        self.answer = answer

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[str]]:
        records = []
        for position, raw in zip(batch["position"], batch["question"]):
            question = Question.model_validate_json(str(raw))
            records.append(self.answer(self.strategy, question, int(position)).model_dump_json())
        return {"record": records}


def _check_picklable(strategy_factory: Any, answer: Any) -> None:
    from ray import cloudpickle

    try:
        cloudpickle.dumps((strategy_factory, answer))
    except Exception as exc:  # noqa: BLE001 - any pickling failure, reported with the fix
        raise TypeError(
            "the Ray engine sends the strategy factory and the judge to its actors, so both must pickle "
            "(routerag eval builds them from the configuration: eval.setup.ConfigStrategyFactory and "
            f"llm.factory.DeferredModel); this one does not: {type(exc).__name__}: {exc}"
        ) from None


def run_on_ray(
    todo: Sequence[tuple[int, Question]],
    strategy_factory: Callable[[], Strategy],
    answer: Callable[[Strategy, Question, int], QuestionRecord],
    finish: Callable[[QuestionRecord], None],
    *,
    actors: int,
    actor_cpus: float = 1.0,
    batch_size: int = 1,
) -> None:
    """Answer ``todo`` (sample position, question) on a pool of Ray actors and hand each record
    to ``finish`` in this thread as it arrives. ``batch_size`` questions per actor call (and per
    block: a block's records come back together, so 1 streams each record as soon as it is
    answered and an interruption loses only the questions in flight)."""
    if not todo:
        return
    if actors < 1 or batch_size < 1 or actor_cpus < 0:
        raise ValueError("actors and batch_size must be at least 1, actor_cpus at least 0")
    _check_picklable(strategy_factory, answer)
    ensure_ray()
    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = False  # the runner shows its own
    items = [{"position": position, "question": question.model_dump_json()} for position, question in todo]
    dataset = ray.data.from_items(items, override_num_blocks=math.ceil(len(items) / batch_size))
    answered = dataset.map_batches(
        AnswerBatches,
        fn_constructor_kwargs={"strategy_factory": strategy_factory, "answer": answer,
                               "environment": driver_environment(), "cwd": os.getcwd()},
        batch_size=batch_size,
        compute=ray.data.ActorPoolStrategy(size=min(actors, len(items))),
        num_cpus=actor_cpus,
    )
    rows = iter(answered.iter_rows())
    try:
        for row in rows:
            finish(QuestionRecord.model_validate_json(row["record"]))
    finally:
        close = getattr(rows, "close", None)
        if close is not None:  # stop the pipeline and its actors now (an interruption, a failed write)
            close()
