"""``GET /health`` (the process answers) and ``GET /ready`` (started, the default strategy warmed
up, not stopping, and the asks bound not reached; 503 otherwise). Neither needs an API key; both
are async and depend only on the service itself, so they are answered on the event loop and never
wait for a worker thread (asks, preparations) or a lock that model work holds."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from routerag.server.deps import get_service
from routerag.server.service import Readiness, Service

__all__ = ["router"]

router = APIRouter()


@router.get("/health", summary="the process answers (no API key needed)")
async def health(service: Service = Depends(get_service)) -> dict[str, Any]:
    return {"status": "ok", "model": service.model.name, "sources": service.sources.names()}


@router.get("/ready", response_model=Readiness, responses={503: {"model": Readiness, "description": "not ready"}},
            summary="ready for asks: started, warmed up, not stopping, and the asks bound not reached; else 503 "
                    "(no API key needed)")
async def ready(service: Service = Depends(get_service)) -> JSONResponse:
    reply = service.readiness()
    return JSONResponse(reply.model_dump(mode="json"), status_code=200 if reply.ready else 503)
