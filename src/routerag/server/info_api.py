"""What the UI needs to build its forms: ``GET /v1/strategies`` (each with its params' JSON
schema), ``GET /v1/schema/trace`` (every field of a ``Trace``), ``GET /v1/info`` (the model and
the limits)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from routerag.llm.base import ChatModel
from routerag.server.deps import get_service, require_key
from routerag.server.service import Service
from routerag.strategies import STRATEGIES
from routerag.trace import trace_json_schema

__all__ = ["ServiceInfo", "StrategyInfo", "router"]

router = APIRouter()


class StrategyInfo(BaseModel):
    name: str
    params_schema: dict[str, Any]


class ServiceInfo(BaseModel):
    model: str
    backend: str
    adapter: str | None = Field(None, description="the policy adapter the configured model applies (name@sha256:prefix)")
    strategy_adapters: dict[str, str] = Field(
        default_factory=dict, description="strategies answered with another adapter (the shipped policy) -> that adapter")
    sources: list[str]
    api_key_required: bool
    max_question_chars: int
    max_upload_bytes: int
    max_upload_rows: int


def backend_name(model: ChatModel) -> str:
    inner = model
    while hasattr(inner, "inner"):  # the concurrency limit and the cache wrap the backend's model
        inner = inner.inner
    return type(inner).__name__


@router.get("/v1/strategies", response_model=list[StrategyInfo], dependencies=[Depends(require_key)])
async def strategies() -> list[StrategyInfo]:
    infos = []
    for name in STRATEGIES.names():
        try:
            cls = STRATEGIES.get(name)
        except ImportError:
            continue  # an optional dependency is missing; the strategy is not offered
        infos.append(StrategyInfo(name=name, params_schema=cls.Params.model_json_schema()))
    return infos


@router.get("/v1/schema/trace", summary="the JSON schema of a Trace: every field the UI may read (no API key needed)")
async def trace_schema() -> dict[str, Any]:
    return trace_json_schema()


@router.get("/v1/info", response_model=ServiceInfo, dependencies=[Depends(require_key)],
            summary="the model and limits, for the UI")
async def info(service: Service = Depends(get_service)) -> ServiceInfo:
    settings = service.settings
    return ServiceInfo(model=service.model.name, backend=backend_name(service.model), adapter=service.base_adapter,
                       strategy_adapters=service.strategy_adapters, sources=service.sources.names(),
                       api_key_required=settings.api_key is not None, max_question_chars=settings.max_question_chars,
                       max_upload_bytes=settings.uploads.max_bytes, max_upload_rows=settings.uploads.max_rows)
