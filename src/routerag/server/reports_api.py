"""``/v1/routing-reports``: the routing reports the operator wrote into the service's data folder
(``routerag routing-report --out <data_dir>/reports/<name>``), for the web UI's Runs tab."""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter, Depends
from fastapi.responses import FileResponse

from routerag.server.deps import get_service
from routerag.server.errors import ErrorReply
from routerag.server.report_store import ReportEntry
from routerag.server.service import Service
from routerag.train.router.report import RoutingReport

__all__ = ["router"]

router = APIRouter(prefix="/v1/routing-reports", tags=["routing reports"])
NO_REPORT: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorReply, "description": "no such report (or it has no figure)"},
    503: {"model": ErrorReply, "description": "the report's files cannot be read"}}


@router.get("", response_model=list[ReportEntry], summary="the routing reports in the service's reports folder")
async def list_reports(service: Service = Depends(get_service)) -> list[ReportEntry]:
    return await anyio.to_thread.run_sync(service.reports.list)


@router.get("/{name}", response_model=RoutingReport, responses=NO_REPORT, summary="one routing report (its JSON)")
async def get_report(name: str, service: Service = Depends(get_service)) -> RoutingReport:
    return await anyio.to_thread.run_sync(service.reports.report, name)


@router.get("/{name}/plot", response_class=FileResponse, responses={**NO_REPORT, 200: {"content": {"image/png": {}}}},
            summary="its figure: recall against evidence tokens, one point per choice and router (PNG)")
async def get_plot(name: str, service: Service = Depends(get_service)) -> FileResponse:
    path = await anyio.to_thread.run_sync(service.reports.plot, name)
    return FileResponse(path, media_type="image/png")
