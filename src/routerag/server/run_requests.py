"""A ``/v1/runs`` request made a run (:mod:`routerag.server.jobs`): its questions checked against
the service's limits and loaded (given, or sampled evenly from a named dataset), each configuration
prepared as an ask's is (off the event loop), its answers admitted (one unit per answer), then
submitted; and a stored run resumed from the configurations its client sent. Refusals are domain
errors: :class:`RequestRefused` (422), :class:`RunNotResumableError` (409),
:class:`RunStoreFullError` (507), :class:`RunStoreUnreadableError` (503)."""

from __future__ import annotations

from functools import partial

import anyio
from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

from routerag.corpus.sampling import evenly_spaced
from routerag.corpus.schema import Question
from routerag.edge.admission import Ticket
from routerag.edge.asks import Prepared, StrategyConfig
from routerag.edge.refusals import RequestRefused
from routerag.runtime.base import Strategy
from routerag.server.jobs import RESUMABLE, ConfigInfo, PreparedConfig, RunNotResumableError, RunQuestion, RunStatus, to_question
from routerag.server.run_space import RunStoreUnreadableError
from routerag.server.service import Service
from routerag.strategies.resolve import strategy_factory

__all__ = ["MAX_CONFIGS", "RunRequest", "resume_run", "start_run"]

MAX_CONFIGS = 8


class RunRequest(BaseModel):
    """Questions (given, or sampled evenly from a named dataset) and one configuration
    (``strategy``/``params``/``sources``) or several (``configs``) to compare."""

    model_config = ConfigDict(extra="forbid")

    questions: list[RunQuestion] | None = Field(None, min_length=1, description="the questions (with optional gold answers)")
    dataset: str | None = Field(None, description="a named dataset (GET /v1/datasets) to sample questions from")
    sample_size: StrictInt | None = Field(None, ge=1, description="keep this many evenly spaced questions")
    strategy: str = "vanilla"
    params: dict = Field(default_factory=dict)
    sources: list[str] = Field(default_factory=list, max_length=16)
    configs: list[StrategyConfig] | None = Field(None, min_length=1, max_length=MAX_CONFIGS,
                                                 description="configurations to compare on the same questions")

    @model_validator(mode="after")
    def _one_question_source(self) -> RunRequest:
        if (self.questions is None) == (self.dataset is None):
            raise ValueError("give either questions or dataset")
        return self


def _labels(configs: list[StrategyConfig]) -> list[str]:
    labels: list[str] = []
    for c in configs:
        base = c.label or c.strategy
        label, n = base, 2
        while label in labels:
            label, n = f"{base} #{n}", n + 1
        labels.append(label)
    return labels


def _run_config(service: Service, prepared: Prepared, config: StrategyConfig, label: str) -> PreparedConfig:
    strategy, sourceset = prepared.strategy, prepared.sources

    def make() -> Strategy:
        return strategy_factory(strategy, service.answerer.model_for(strategy), sourceset)()  # the model: built on first use

    info = ConfigInfo(label=label, strategy=strategy.name, params=strategy.params.model_dump(mode="json"),
                      sources=list(config.sources), adapter=strategy.adapter)
    return PreparedConfig(info=info, make=make, request=config.model_dump(mode="json"))


async def _run_configs(service: Service, configs: list[StrategyConfig], labels: list[str]) -> list[PreparedConfig]:
    """Every configuration prepared (off the event loop: preparing mounts uploads and may unpack an adapter)."""
    return [_run_config(service, await service.prepare(config), config, label) for config, label in zip(configs, labels)]


def _load_questions(body: RunRequest) -> list[Question]:
    if body.questions is not None:
        picked = evenly_spaced(body.questions, body.sample_size)
        return [to_question(q, i) for i, q in enumerate(picked)]
    from routerag.corpus.datasets import DataNotFoundError, dataset_names, load_dataset

    assert body.dataset is not None
    if body.dataset not in dataset_names():  # never a file path
        raise RequestRefused(f"unknown dataset {body.dataset!r}; valid: {', '.join(dataset_names())}")
    try:
        data = load_dataset(body.dataset, n_questions=body.sample_size or 20)
    except (DataNotFoundError, ValueError) as exc:
        raise RequestRefused(f"dataset {body.dataset!r} cannot be loaded: {exc}") from None
    return list(data.questions)


def _admit(service: Service, identity: str | None, answers: int) -> Ticket:
    never = service.run_answers.fits(answers)
    if never:
        raise RequestRefused(f"the run is too large for this service: {never}")
    return service.run_answers.admit(identity, answers)


def _check_size(service: Service, body: RunRequest) -> None:
    most = service.settings.max_run_questions
    if body.questions is not None and len(body.questions) > most:
        raise RequestRefused(f"{len(body.questions)} questions; a run takes at most {most}")
    if body.sample_size is not None and body.sample_size > most:
        raise RequestRefused(f"sample_size {body.sample_size}; a run takes at most {most}")
    for i, q in enumerate(body.questions or []):
        service.answerer.check_question(q.question, f"question {i}")


async def start_run(service: Service, body: RunRequest, identity: str | None) -> RunStatus:
    """Queue the run ``body`` asks for; ``identity``: the client's, for the per-key bound."""
    _check_size(service, body)
    configs = body.configs or [StrategyConfig(strategy=body.strategy, params=body.params, sources=body.sources)]
    run_configs = await _run_configs(service, configs, _labels(configs))
    questions = await anyio.to_thread.run_sync(_load_questions, body)
    if not questions:
        raise RequestRefused("no questions to run")
    ticket = _admit(service, identity, len(questions) * len(run_configs))
    try:  # in a worker thread: a large run's files are written before it is queued
        return await anyio.to_thread.run_sync(partial(service.runs.submit, run_configs, questions, dataset=body.dataset,
                                                      ticket=ticket))
    except ValueError as exc:  # refused before the run was queued (RunStoreFullError too): its answers are not held
        ticket.release()
        raise RequestRefused(str(exc)) from None
    except BaseException:
        ticket.release()
        raise


async def resume_run(service: Service, run_id: str, identity: str | None) -> RunStatus:
    """Continue an interrupted or cancelled run with the configurations its client sent, rebuilt
    and checked as a new run's are (a source since removed: refused)."""
    infos, requests = service.runs.requests(run_id)
    if len(requests) != len(infos):
        raise RunNotResumableError(f"run {run_id!r} was stored without its requests and cannot be resumed")
    stored = [StrategyConfig.model_validate(request) for request in requests]
    configs = await _run_configs(service, stored, [info.label for info in infos])
    status = service.runs.status(run_id)
    if status.state not in RESUMABLE:
        raise RunNotResumableError(f"run {run_id!r} is {status.state}; only an interrupted or cancelled run resumes")
    ticket = _admit(service, identity, max(0, status.total - status.done))  # what is left, at most
    try:
        return await anyio.to_thread.run_sync(partial(service.runs.resume, run_id, configs, ticket=ticket))
    except (ValueError, OSError) as exc:  # not resumed: its answers are not held
        ticket.release()
        if isinstance(exc, OSError):
            raise RunStoreUnreadableError(f"the run's answers cannot be read ({type(exc).__name__}: {exc})") from None
        raise  # RunNotResumableError: 409
