"""The ask service: run a routing strategy over an injected model and ``SourceSet``.

* ``POST /v1/ask``: ``{question, strategy, params, sources}`` returns the run's ``Trace``.
* ``POST /v1/ask/stream``: the same run as server-sent events. Events arrive in this order:
  ``start``; ``retrieval``/``model`` as they return and ``step`` as each step joins the trace (the
  strategy context's step observer); ``trace`` (the full trace), ``done``.
* ``POST /v1/runs``: a background run over many questions (given, or sampled evenly from a named
  dataset) with one configuration, or a comparison of several. ``GET /v1/runs/{id}`` polls,
  ``/traces`` pages, ``/report`` gives the comparison table and disagreements, ``DELETE`` cancels,
  ``POST /v1/runs/{id}/resume`` continues a run a crash interrupted (:mod:`routerag.server.jobs`).
* ``POST/GET/DELETE /v1/sources``: upload custom sources (see :mod:`routerag.server.sources_api`);
  a request mounts them by name with ``sources: [...]``.
* ``GET /v1/routing-reports`` (``/{name}``, ``/{name}/plot``): the routing reports the operator
  wrote under ``data_dir/reports`` (:mod:`routerag.server.report_store`), read-only.
* ``GET /v1/strategies``, ``GET /v1/datasets``, ``GET /v1/info``: what the UI needs to build forms.
* ``GET /health`` (the process answers) and ``GET /ready`` (started, the default strategy warmed
  up, and asks are admitted; 503 otherwise): no API key, answered on the event loop without waiting
  behind model work. The warm-up (:mod:`routerag.server.warmup`) runs in a background thread from
  startup; ``warm_up: false`` turns it off.
* Preparing a request (mounting its uploads, resolving its strategy, which may unpack an adapter)
  runs in a worker thread of the default pool on every route (asks, chat completions, runs and
  their resumption), never on the event loop and never behind the runs the ask limiter holds.
* Admission (:mod:`routerag.edge.admission`): asks queued or running and run answers not yet
  answered are bounded per service and per API key; over a bound, 429 with ``Retry-After``.
* The retrieval API (``/retrieve``, ``/sources``, ...) is mounted under ``/retrieval``; the web UI at ``/``.

The routes are thin modules over one :class:`~routerag.server.service.Service` (the model pool,
the sources, the runs, the admission, the thread limit, the settings), which each reaches through
a FastAPI dependency (:mod:`routerag.server.deps`): :mod:`~routerag.server.ask_api`,
:mod:`~routerag.server.runs_api`, :mod:`~routerag.server.sources_api`,
:mod:`~routerag.server.openai_api`, :mod:`~routerag.server.info_api`,
:mod:`~routerag.server.health_api`. Domain errors are turned into HTTP here, at the edge: one table
for the native routes (:mod:`routerag.server.domain_errors`), OpenAI's shape on the OpenAI routes
(:mod:`routerag.server.openai_errors`).

A strategy's ``params`` arrive as JSON and are validated into the strategy's own ``Params``
model before anything runs, as a request's (:mod:`routerag.provenance`): they name registered
parts and the plugins in ``security.allowed_plugins`` only, and paths inside ``data_dir``. A bad
strategy name or bad params get 422 with the reason.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse

from routerag.edge.admission import install_admission_handler
from routerag.edge.guard import RequestGuard
from routerag.llm.base import ChatModel
from routerag.llm.config import ModelConfig
from routerag.server import ask_api, health_api, info_api, openai_api, reports_api, runs_api, sources_api
from routerag.server.deps import install_service, require_key
from routerag.server.domain_errors import install_domain_errors
from routerag.server.openai_errors import refusal_body
from routerag.server.retrieval_app import create_retrieval_app, install_error_handlers
from routerag.server.service import Service
from routerag.server.settings import ServiceSettings
from routerag.server.sources_api import rejected_reply
from routerag.server.upload_parse import UploadRejected
from routerag.sources.sourceset import SourceSet

__all__ = ["create_app"]


def _guard(app: FastAPI, settings: ServiceSettings) -> None:
    """The front door: Host/Origin, the API key of state-changing requests, body limits."""
    upload_limit = max(settings.max_body_bytes, settings.uploads.max_bytes + 64 * 1024)  # multipart slack

    def body_limit(path: str) -> int:
        return upload_limit if path.rstrip("/") == "/v1/sources" else settings.max_body_bytes

    app.add_middleware(RequestGuard, bind_host=settings.host, api_key=settings.api_key, max_body_bytes=settings.max_body_bytes,
                       security=settings.security, body_limit=body_limit, refusal_body=refusal_body)


def _errors(app: FastAPI) -> None:
    """Refusals as HTTP, at the edge: the service's own errors, the admission's 429, routerag's kinds, uploads'."""
    install_error_handlers(app)
    install_admission_handler(app)
    install_domain_errors(app)  # routerag's refusals (a strategy request, a run) -> their HTTP status

    @app.exception_handler(UploadRejected)
    async def _rejected(_: Request, exc: UploadRejected) -> JSONResponse:
        return rejected_reply(exc)


def create_app(model: ChatModel, sources: SourceSet, settings: ServiceSettings | None = None, *,
               model_config: ModelConfig | None = None) -> FastAPI:
    """The service over ``model``. With ``model_config`` (what ``model`` was built from), a request
    runs on the model the front door resolves for its strategy — the shipped policy for
    ``routerag`` on the bundled 0.5B, built on first use — as ``routerag ask`` does."""
    service = Service(model, sources, settings, model_config=model_config)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await service.start()
        yield
        await service.stop()

    app = FastAPI(title="routerag", version="1", lifespan=lifespan,
                  description="Ask questions through learned/adaptive routing strategies and watch their traces.")
    install_service(app, service)
    _errors(app)
    _guard(app, service.settings)
    auth = [Depends(require_key)]
    app.include_router(info_api.router)
    app.include_router(ask_api.router)
    app.include_router(runs_api.router, dependencies=auth)
    app.include_router(sources_api.router, dependencies=auth)
    app.include_router(reports_api.router, dependencies=auth)
    app.include_router(openai_api.router, dependencies=auth)
    app.include_router(health_api.router)  # no API key; answered on the event loop
    app.mount("/retrieval", create_retrieval_app(sources, service.settings.retrieval_settings()))
    if service.settings.ui:
        from routerag.server.ui import mount_ui

        mount_ui(app)
    return app
