"""``serve`` (the ask service: strategies over a model and an index's sources, the web UI) and
``serve_retrieval`` (the retrieval API alone) — the jobs of ``routerag serve`` and
``routerag serve-retrieval``. Both serve in the foreground until interrupted; :func:`ask_app` and
:func:`retrieval_app` build the ASGI apps without serving them (tests, notebooks)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from routerag.errors import RouteragError
from routerag.llm.base import ModelError
from routerag.llm.config import ModelConfig
from routerag.progress import Announce

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from routerag.server.settings import ServerSettings, ServiceSettings
    from routerag.sources.sourceset import SourceSet


class ServeRequestError(RouteragError, ValueError):
    """A service that cannot start as asked (no source could be mounted)."""


class ServeParams(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    index_dir: Path = Field(description="an index directory built with `routerag index`")
    modes: list[str] | None = Field(None, description="source modes to mount (default: all)")
    model: ModelConfig = Field(default_factory=ModelConfig, description="the model (ask service only)")



def retrieval_settings(config: Path | None, overrides: Sequence[str] | None = ()) -> ServerSettings:
    """The retrieval API's settings: a YAML file of ``ServerSettings`` and ``key.path=value`` overrides."""
    from routerag.config import load_config
    from routerag.server.settings import ServerSettings

    return load_config(ServerSettings, config, list(overrides or ()))


def service_settings(config: Path | None, overrides: Sequence[str] | None = ()) -> ServiceSettings:
    """The ask service's settings: a YAML file of ``ServiceSettings`` and ``key.path=value`` overrides."""
    from routerag.config import load_config
    from routerag.server.settings import ServiceSettings

    return load_config(ServiceSettings, config, list(overrides or ()))


def load_model_config(config: Path | None, overrides: Sequence[str] | None = ()) -> ModelConfig:
    """A model configuration: a YAML file of ``ModelConfig`` and ``key=value`` overrides."""
    from routerag.config import load_config

    return load_config(ModelConfig, config, list(overrides or ()))

def mounted_sources(index_dir: Path, modes: list[str] | None, announce: Announce) -> SourceSet:
    """The index's sources (``modes``, or all); each one that cannot be mounted is announced."""
    from routerag.index.bundle import load_index
    from routerag.sources.registry import mount_bundle

    sources, unmounted = mount_bundle(load_index(index_dir), modes or None)
    for mode, why in unmounted.items():
        announce(f"not serving {mode}: {why}")
    if not sources.names():
        raise ServeRequestError(f"{index_dir}: no source could be mounted")
    return sources


def ask_app(params: ServeParams, settings: ServiceSettings, announce: Announce = lambda _: None) -> tuple[ASGIApp, str]:
    """The ask service's app over ``params.model`` with the model environment applied (read once,
    at the start), and a line saying what it serves."""
    from routerag.api.environment import model_environment
    from routerag.llm.factory import build_model
    from routerag.server.app import create_app

    sources = mounted_sources(params.index_dir, params.modes, announce)
    try:
        model_config = params.model.with_environment(model_environment())
        model = build_model(model_config)
    except (ModelError, ValueError, ImportError) as exc:
        raise ModelError(f"cannot build the model: {exc}") from None
    line = (f"serving model {model.name} over {', '.join(sources.names())} on http://{settings.host}:{settings.port} "
            f"(docs at /docs{', API key required' if settings.api_key else ''})")
    return create_app(model, sources, settings, model_config=model_config), line


def serve(params: ServeParams, settings: ServiceSettings, *, announce: Announce = lambda _: None) -> None:
    """Serve ``POST /v1/ask``, ``/v1/ask/stream``, ``/v1/runs``, the retrieval API under
    ``/retrieval`` and the web UI, in the foreground."""
    from routerag.edge.serving import serve as run_server

    app, line = ask_app(params, settings, announce)
    announce(line)
    run_server(app, settings.host, settings.port, security=settings.security)


def retrieval_app(params: ServeParams, settings: ServerSettings, announce: Announce = lambda _: None) -> tuple[ASGIApp, str]:
    from routerag.server.retrieval_app import create_retrieval_app

    sources = mounted_sources(params.index_dir, params.modes, announce)
    line = (f"serving {', '.join(sources.names())} from {params.index_dir} on http://{settings.host}:{settings.port} "
            f"(docs at /docs{', API key required' if settings.api_key else ''})")
    return create_retrieval_app(sources, settings), line


def serve_retrieval(params: ServeParams, settings: ServerSettings, *, announce: Announce = lambda _: None) -> None:
    """Serve ``POST /retrieve``, ``GET /sources``, ``GET /health`` and the Search-R1 endpoint."""
    from routerag.edge.serving import serve as run_server

    app, line = retrieval_app(params, settings, announce)
    announce(line)
    run_server(app, settings.host, settings.port, security=settings.security)


def serve_retrieval_on_ray(params: ServeParams, settings: ServerSettings, *, replicas: int = 1, encoder_replicas: int = 1,
                           announce: Announce = lambda _: None) -> None:
    """The retrieval API of :func:`serve_retrieval` behind Ray Serve: ``replicas`` retrieval
    replicas that each open the bundle and ``encoder_replicas`` batched query encoders (the
    ``scale`` extra; joins the cluster at ``RAY_ADDRESS``, else starts Ray locally)."""
    from routerag.index.bundle import read_bundle_manifest

    read_bundle_manifest(params.index_dir)  # an IndexLoadError (a RouteragError) before Ray starts
    try:
        from routerag.server.ray_serve import RayServeSettings, serve_on_ray
    except ImportError as exc:
        raise ServeRequestError(f"--ray needs the scale extra: pip install 'routerag[scale]' ({exc})") from None
    announce(f"serving {params.index_dir} with {replicas} Ray Serve replica(s) on http://{settings.host}:{settings.port} "
             f"(docs at /docs{', API key required' if settings.api_key else ''})")
    serve_on_ray(params.index_dir, params.modes, settings, RayServeSettings(replicas=replicas, encoder_replicas=encoder_replicas))


def service_openapi() -> dict[str, Any]:
    """The ask service's OpenAPI document, from the app built over a scripted model, no sources and
    a throw-away data folder (its routes depend on none of them); nothing is served
    (``routerag docs reference``)."""
    import tempfile

    from routerag.llm.scripted import ScriptedModel
    from routerag.server.app import create_app
    from routerag.server.settings import ServiceSettings
    from routerag.sources.sourceset import SourceSet

    with tempfile.TemporaryDirectory(prefix="routerag-reference-") as tmp:
        app = create_app(ScriptedModel(["unused"]), SourceSet(), ServiceSettings(data_dir=Path(tmp)))
        try:
            return app.openapi()
        finally:
            app.state.service.close()


def retrieval_openapi() -> dict[str, Any]:
    """The retrieval server's OpenAPI document, from the app built over no sources."""
    from routerag.server.retrieval_app import create_retrieval_app
    from routerag.sources.sourceset import SourceSet

    return create_retrieval_app(SourceSet()).openapi()
