"""``routerag serve-retrieval INDEX_DIR`` (the retrieval API) and ``routerag serve INDEX_DIR`` (the
ask service: strategies over a model and the index's sources). Both bind loopback by default."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer

from routerag.cli.app import app

if TYPE_CHECKING:
    from routerag.sources.sourceset import SourceSet


def _fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _server_overrides(host: str, port: int, api_key_env: str | None, overrides: list[str] | None) -> list[str]:
    # JSON strings are YAML scalars: a key such as "123" or "a: b" stays a string
    result = [f"host={json.dumps(host)}", f"port={port}", *(overrides or [])]
    if api_key_env:
        key = os.environ.get(api_key_env)
        if not key:
            _fail(f"--api-key-env {api_key_env}: that environment variable is not set or empty")
        result.append(f"api_key={json.dumps(key)}")
    return result


def _load_sources(index_dir: Path, modes: list[str] | None) -> "SourceSet":
    from routerag.index.bundle import load_index
    from routerag.index.manifest import IndexError_

    wanted = [m.strip() for value in modes or [] for m in value.split(",") if m.strip()] or None
    try:
        bundle = load_index(index_dir)
    except IndexError_ as exc:
        _fail(str(exc))
    sources = bundle.sources(wanted)
    for mode, why in bundle.unmounted.items():
        typer.echo(f"not serving {mode}: {why}", err=True)
    if not sources.names():
        _fail(f"{index_dir}: no source could be mounted")
    return sources


def _serve_on_ray(index_dir: Path, modes: list[str] | None, settings, replicas: int, encoder_replicas: int) -> None:
    from routerag.index.bundle import read_bundle_manifest
    from routerag.index.manifest import IndexError_

    try:
        read_bundle_manifest(index_dir)
        from routerag.server.ray_serve import RayServeSettings, serve_on_ray
    except IndexError_ as exc:
        _fail(str(exc))
    except ImportError as exc:
        _fail(f"--ray needs the scale extra: pip install 'routerag[scale]' ({exc})")
    wanted = [m.strip() for value in modes or [] for m in value.split(",") if m.strip()] or None
    typer.echo(
        f"serving {index_dir} with {replicas} Ray Serve replica(s) on http://{settings.host}:{settings.port} "
        f"(docs at /docs{', API key required' if settings.api_key else ''})",
        err=True,
    )
    serve_on_ray(index_dir, wanted, settings, RayServeSettings(replicas=replicas, encoder_replicas=encoder_replicas))


@app.command("serve-retrieval")
def serve_retrieval_command(
    index_dir: Path = typer.Argument(..., help="an index directory built with `routerag index`"),
    host: str = typer.Option("127.0.0.1", "--host", help="bind address (a non-loopback address needs an API key)"),
    port: int = typer.Option(8765, "--port", help="TCP port"),
    api_key_env: str = typer.Option(
        None, "--api-key-env", help="name of an environment variable holding the API key clients must send"
    ),
    modes: list[str] = typer.Option(None, "--sources", "-s", help="comma-separated source modes to mount (default: all)"),
    config: Path = typer.Option(None, "--config", help="a YAML file of ServerSettings"),
    overrides: list[str] = typer.Option(None, "--set", help="override a setting: key.path=value (repeatable)"),
    on_ray: bool = typer.Option(
        False, "--ray", help="serve through Ray Serve replicas (the `scale` extra; joins RAY_ADDRESS, else starts Ray locally)"
    ),
    replicas: int = typer.Option(1, "--replicas", min=1, help="with --ray: retrieval replicas, each opening the bundle"),
    encoder_replicas: int = typer.Option(1, "--encoder-replicas", min=1, help="with --ray: query-encoder replicas"),
) -> None:
    """Serve POST /retrieve, GET /sources, GET /health and the Search-R1 endpoint (/retrieve/searchr1)."""
    from routerag.config import ConfigError, load_config
    from routerag.server.retrieval_app import create_retrieval_app
    from routerag.server.serving import serve
    from routerag.server.settings import ServerSettings

    try:
        settings = load_config(ServerSettings, config, _server_overrides(host, port, api_key_env, overrides))
    except ConfigError as exc:
        _fail(str(exc))
    if on_ray:
        _serve_on_ray(index_dir, modes, settings, replicas, encoder_replicas)
        return
    sources = _load_sources(index_dir, modes)
    typer.echo(
        f"serving {', '.join(sources.names())} from {index_dir} on http://{settings.host}:{settings.port} "
        f"(docs at /docs{', API key required' if settings.api_key else ''})",
        err=True,
    )
    serve(create_retrieval_app(sources, settings), settings.host, settings.port)


@app.command("serve")
def serve_command(
    index_dir: Path = typer.Argument(..., help="an index directory built with `routerag index`"),
    host: str = typer.Option("127.0.0.1", "--host", help="bind address (a non-loopback address needs an API key)"),
    port: int = typer.Option(8700, "--port", help="TCP port"),
    api_key_env: str = typer.Option(None, "--api-key-env", help="environment variable holding the API key clients must send"),
    modes: list[str] = typer.Option(None, "--sources", "-s", help="comma-separated source modes to mount (default: all)"),
    model_config: Path = typer.Option(None, "--model-config", help="a YAML file of ModelConfig"),
    model_overrides: list[str] = typer.Option(None, "--model-set", help="override a model setting: key=value (repeatable)"),
    config: Path = typer.Option(None, "--config", help="a YAML file of ServiceSettings"),
    overrides: list[str] = typer.Option(None, "--set", help="override a service setting: key.path=value (repeatable)"),
) -> None:
    """Serve POST /v1/ask, /v1/ask/stream, /v1/runs and the retrieval API under /retrieval."""
    from routerag.config import ConfigError, load_config
    from routerag.llm.base import ModelError
    from routerag.llm.config import ModelConfig
    from routerag.llm.factory import build_model
    from routerag.server.app import create_app
    from routerag.server.serving import serve
    from routerag.server.settings import ServiceSettings

    try:
        settings = load_config(ServiceSettings, config, _server_overrides(host, port, api_key_env, overrides))
        model_cfg = load_config(ModelConfig, model_config, model_overrides)
    except ConfigError as exc:
        _fail(str(exc))
    sources = _load_sources(index_dir, modes)
    try:
        model = build_model(model_cfg)
    except (ModelError, ValueError, ImportError) as exc:
        _fail(f"cannot build the model: {exc}")
    typer.echo(
        f"serving model {model.name} over {', '.join(sources.names())} on http://{settings.host}:{settings.port} "
        f"(docs at /docs{', API key required' if settings.api_key else ''})",
        err=True,
    )
    serve(create_app(model, sources, settings, model_config=model_cfg), settings.host, settings.port)
