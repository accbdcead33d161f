"""``/v1/runs``: background runs and comparisons (:mod:`routerag.server.run_requests` makes a
request a run), and ``/v1/datasets`` to sample questions from."""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel

from routerag.edge.admission import OVER_BOUND, client_identity
from routerag.server import run_requests
from routerag.server.deps import get_service
from routerag.server.errors import ERRORS, ErrorReply
from routerag.server.jobs import RunReport, RunStatus
from routerag.server.run_requests import MAX_CONFIGS, RunRequest
from routerag.server.service import Service
from routerag.trace import Trace

__all__ = ["DatasetInfo", "RunRequest", "router"]

router = APIRouter(tags=["runs"])
NO_RUN: dict[int | str, dict[str, Any]] = {404: {"model": ErrorReply, "description": "no such run"}}


class DatasetInfo(BaseModel):
    name: str


@router.get("/v1/datasets", response_model=list[DatasetInfo])
async def datasets() -> list[DatasetInfo]:
    from routerag.corpus.datasets import dataset_names

    return [DatasetInfo(name=n) for n in dataset_names()]


@router.post("/v1/runs", response_model=RunStatus, status_code=202, responses={
                 **ERRORS, **OVER_BOUND, 507: {"model": ErrorReply, "description": "the run store is full"}},
             summary="start a background run (one configuration) or comparison (several)")
async def start_run(body: RunRequest, request: Request, service: Service = Depends(get_service)) -> RunStatus:
    return await run_requests.start_run(service, body, client_identity(request.headers, service.settings.api_key))


@router.get("/v1/runs", response_model=list[RunStatus], summary="runs, newest first")
async def list_runs(service: Service = Depends(get_service)) -> list[RunStatus]:
    return service.runs.list()


@router.get("/v1/runs/{run_id}", response_model=RunStatus, responses=NO_RUN)
async def run_status(run_id: str, service: Service = Depends(get_service)) -> RunStatus:
    return service.runs.status(run_id)


@router.get("/v1/runs/{run_id}/traces", response_model=list[Trace], responses={
    **NO_RUN, 503: {"model": ErrorReply, "description": "the run's stored answers cannot be read"}})
async def run_traces(run_id: str, offset: int = Query(0, ge=0), limit: int = Query(100, ge=1, le=1000),
                     config: int | None = Query(None, ge=0, lt=MAX_CONFIGS),
                     service: Service = Depends(get_service)) -> list[Trace]:
    return await anyio.to_thread.run_sync(service.runs.traces, run_id, offset, limit, config)  # a finished run: read from disk


@router.get("/v1/runs/{run_id}/report", response_model=RunReport,
            summary="per-configuration EM/F1/latency/tokens/turns and per-question disagreements")
async def run_report(run_id: str, service: Service = Depends(get_service)) -> RunReport:
    return await anyio.to_thread.run_sync(service.runs.report, run_id)


@router.post("/v1/runs/{run_id}/resume", response_model=RunStatus, status_code=202, responses={
                 **ERRORS, **OVER_BOUND, **NO_RUN,
                 409: {"model": ErrorReply, "description": "the run is not interrupted or cancelled"}},
             summary="continue an interrupted (or cancelled) run: only the questions it has not answered run")
async def resume_run(run_id: str, http: Request, service: Service = Depends(get_service)) -> RunStatus:
    return await run_requests.resume_run(service, run_id, client_identity(http.headers, service.settings.api_key))


@router.delete("/v1/runs/{run_id}", response_model=RunStatus, summary="cancel a run")
async def cancel_run(run_id: str, service: Service = Depends(get_service)) -> RunStatus:
    return await anyio.to_thread.run_sync(service.runs.cancel, run_id)  # a run with nothing running is stored now
