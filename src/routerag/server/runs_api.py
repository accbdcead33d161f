"""``/v1/runs``: background runs and comparisons, and ``/v1/datasets`` to sample questions from."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import anyio
from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

from routerag.corpus.sampling import evenly_spaced
from routerag.corpus.schema import Question
from routerag.edge.admission import OVER_BOUND, Admission, Ticket, client_identity
from routerag.llm.base import ChatModel
from routerag.runtime.base import Strategy
from routerag.server.errors import ERRORS, ApiError, ErrorReply
from routerag.server.jobs import (
    RESUMABLE,
    ConfigInfo,
    PreparedConfig,
    RunManager,
    RunQuestion,
    RunReport,
    RunStatus,
    to_question,
)
from routerag.server.prepare import PreparedStrategy, StrategyConfig
from routerag.server.run_space import RunStoreFullError
from routerag.server.settings import ServiceSettings
from routerag.sources.sourceset import SourceSet
from routerag.strategies.resolve import strategy_factory
from routerag.trace import Trace

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


class DatasetInfo(BaseModel):
    name: str


def _labels(configs: list[StrategyConfig]) -> list[str]:
    labels: list[str] = []
    for c in configs:
        base = c.label or c.strategy
        label, n = base, 2
        while label in labels:
            label, n = f"{base} #{n}", n + 1
        labels.append(label)
    return labels


# Over 80 lines: one small closure per /v1/runs route over the run manager, in one router.
def build_runs_router(
    runs: RunManager,
    model_for: Callable[[PreparedStrategy], ChatModel],
    prepare: Callable[[StrategyConfig], tuple[PreparedStrategy, SourceSet]],
    check_question: Callable[[str, str], None],
    settings: ServiceSettings,
    admission: Admission | None = None,
) -> APIRouter:
    """``admission`` bounds the answers not yet answered across runs (one unit per answer,
    given back as each is answered or skipped)."""
    router = APIRouter(tags=["runs"])

    def admit(request: Request, answers: int) -> Ticket | None:
        if admission is None:
            return None
        never = admission.fits(answers)
        if never:
            raise ApiError(422, f"the run is too large for this service: {never}")
        return admission.admit(client_identity(request.headers, settings.api_key), answers)

    def build(config: StrategyConfig, label: str) -> PreparedConfig:
        strategy, sourceset = prepare(config)

        def make() -> Strategy:
            return strategy_factory(strategy, model_for(strategy), sourceset)()  # the model: built on first use

        info = ConfigInfo(label=label, strategy=strategy.name, params=strategy.params.model_dump(mode="json"),
                          sources=list(config.sources), adapter=strategy.adapter)
        return PreparedConfig(info=info, make=make, request=config.model_dump(mode="json"))

    def build_all(configs: list[StrategyConfig], labels: list[str]) -> list[PreparedConfig]:
        """Every configuration prepared (in a worker thread: preparing mounts uploads and may unpack an adapter)."""
        return [build(config, label) for config, label in zip(configs, labels)]

    def load_questions(body: RunRequest) -> list[Question]:
        if body.questions is not None:
            picked = evenly_spaced(body.questions, body.sample_size)
            return [to_question(q, i) for i, q in enumerate(picked)]
        from routerag.corpus.datasets import DataNotFoundError, dataset_names, load_dataset

        assert body.dataset is not None
        if body.dataset not in dataset_names():  # never a file path
            raise ApiError(422, f"unknown dataset {body.dataset!r}; valid: {', '.join(dataset_names())}")
        try:
            data = load_dataset(body.dataset, n_questions=body.sample_size or 20)
        except (DataNotFoundError, ValueError) as exc:
            raise ApiError(422, f"dataset {body.dataset!r} cannot be loaded: {exc}") from None
        return list(data.questions)

    @router.get("/v1/datasets", response_model=list[DatasetInfo])
    async def datasets() -> list[DatasetInfo]:
        from routerag.corpus.datasets import dataset_names

        return [DatasetInfo(name=n) for n in dataset_names()]

    @router.post("/v1/runs", response_model=RunStatus, status_code=202, responses={
                     **ERRORS, **OVER_BOUND, 507: {"model": ErrorReply, "description": "the run store is full"}},
                 summary="start a background run (one configuration) or comparison (several)")
    async def start_run(body: RunRequest, request: Request) -> RunStatus:
        if body.questions is not None and len(body.questions) > settings.max_run_questions:
            raise ApiError(422, f"{len(body.questions)} questions; a run takes at most {settings.max_run_questions}")
        if body.sample_size is not None and body.sample_size > settings.max_run_questions:
            raise ApiError(422, f"sample_size {body.sample_size}; a run takes at most {settings.max_run_questions}")
        for i, q in enumerate(body.questions or []):
            check_question(q.question, f"question {i}")
        configs = body.configs or [StrategyConfig(strategy=body.strategy, params=body.params, sources=body.sources)]
        prepared = await anyio.to_thread.run_sync(build_all, configs, _labels(configs))  # mounts uploads: off the event loop
        questions = await anyio.to_thread.run_sync(load_questions, body)
        if not questions:
            raise ApiError(422, "no questions to run")
        ticket = admit(request, len(questions) * len(prepared))
        try:  # in a worker thread: a large run's files are written before it is queued
            return await anyio.to_thread.run_sync(partial(runs.submit, prepared, questions, dataset=body.dataset,
                                                          ticket=ticket))
        except (ValueError, RunStoreFullError) as exc:  # refused before the run was queued: its answers are not held
            if ticket is not None:
                ticket.release()
            if isinstance(exc, RunStoreFullError):
                raise  # 507 (server/domain_errors.py)
            raise ApiError(422, str(exc)) from None

    @router.get("/v1/runs", response_model=list[RunStatus], summary="runs, newest first")
    async def list_runs() -> list[RunStatus]:
        return runs.list()

    @router.get("/v1/runs/{run_id}", response_model=RunStatus, responses={404: {"model": ErrorReply, "description": "no such run"}})
    async def run_status(run_id: str) -> RunStatus:
        return runs.status(run_id)

    @router.get("/v1/runs/{run_id}/traces", response_model=list[Trace], responses={
        404: {"model": ErrorReply, "description": "no such run"},
        503: {"model": ErrorReply, "description": "the run's stored answers cannot be read"}})
    async def run_traces(run_id: str, offset: int = Query(0, ge=0), limit: int = Query(100, ge=1, le=1000),
                         config: int | None = Query(None, ge=0, lt=MAX_CONFIGS)) -> list[Trace]:
        return await anyio.to_thread.run_sync(runs.traces, run_id, offset, limit, config)  # a finished run: read from disk

    @router.get("/v1/runs/{run_id}/report", response_model=RunReport,
                summary="per-configuration EM/F1/latency/tokens/turns and per-question disagreements")
    async def run_report(run_id: str) -> RunReport:
        return await anyio.to_thread.run_sync(runs.report, run_id)

    @router.post("/v1/runs/{run_id}/resume", response_model=RunStatus, status_code=202, responses={
                     **ERRORS, **OVER_BOUND, 404: {"model": ErrorReply, "description": "no such run"},
                     409: {"model": ErrorReply, "description": "the run is not interrupted or cancelled"}},
                 summary="continue an interrupted (or cancelled) run: only the questions it has not answered run")
    async def resume_run(run_id: str, http: Request) -> RunStatus:
        infos, requests = runs.requests(run_id)
        if len(requests) != len(infos):
            raise ApiError(409, f"run {run_id!r} was stored without its requests and cannot be resumed")
        # rebuilt from what the client sent, checked as a new run is (a source since removed -> 422)
        stored = [StrategyConfig.model_validate(request) for request in requests]
        configs = await anyio.to_thread.run_sync(build_all, stored, [info.label for info in infos])
        status = runs.status(run_id)
        if status.state not in RESUMABLE:
            raise ApiError(409, f"run {run_id!r} is {status.state}; only an interrupted or cancelled run resumes")
        ticket = admit(http, max(0, status.total - status.done))  # what is left, at most
        try:
            return await anyio.to_thread.run_sync(partial(runs.resume, run_id, configs, ticket=ticket))
        except (ValueError, OSError) as exc:  # not resumed: its answers are not held
            if ticket is not None:
                ticket.release()
            if isinstance(exc, OSError):
                raise ApiError(503, f"the run's answers cannot be read ({type(exc).__name__}: {exc})") from None
            raise  # RunNotResumableError: 409 (server/domain_errors.py)

    @router.delete("/v1/runs/{run_id}", response_model=RunStatus, summary="cancel a run")
    async def cancel_run(run_id: str) -> RunStatus:
        return await anyio.to_thread.run_sync(runs.cancel, run_id)  # a run with nothing running is stored now

    return router
