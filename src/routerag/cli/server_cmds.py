"""``routerag serve-retrieval INDEX_DIR`` (the retrieval API) and ``routerag serve INDEX_DIR`` (the
ask service: strategies over a model and the index's sources). Both bind loopback by default."""

from __future__ import annotations

from pathlib import Path

import typer

from routerag.cli.app import app
from routerag.cli.given import given_names
from routerag.cli.serving import announce, server_overrides, source_modes


@app.command("serve-retrieval")
def serve_retrieval_command(
    ctx: typer.Context,
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
    from routerag.api import ServeParams, serve_retrieval
    from routerag.api.serving import retrieval_settings, serve_retrieval_on_ray

    settings = retrieval_settings(config, server_overrides(host, port, api_key_env, overrides, given_names(ctx)))
    params = ServeParams(index_dir=index_dir, modes=source_modes(modes))
    if on_ray:
        serve_retrieval_on_ray(params, settings, replicas=replicas, encoder_replicas=encoder_replicas, announce=announce)
        return
    serve_retrieval(params, settings, announce=announce)


@app.command("serve")
def serve_command(
    ctx: typer.Context,
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
    from routerag.api import ServeParams, serve
    from routerag.api.serving import load_model_config, service_settings

    settings = service_settings(config, server_overrides(host, port, api_key_env, overrides, given_names(ctx)))
    model_cfg = load_model_config(model_config, model_overrides)
    serve(ServeParams(index_dir=index_dir, modes=source_modes(modes), model=model_cfg), settings, announce=announce)
