"""``routerag mcp INDEX_DIR``: the index's search and routerag's answering as MCP tools, over stdio
(the client starts the command) or streamable HTTP (loopback by default, like ``routerag serve``)."""

from __future__ import annotations

from pathlib import Path

import typer

from routerag.cli.app import app
from routerag.cli.given import given_names
from routerag.cli.native_logs import quiet_native_logs
from routerag.cli.serving import announce, server_overrides, source_modes


@app.command("mcp")
def mcp_command(
    ctx: typer.Context,
    index_dir: Path = typer.Argument(..., help="an index directory built with `routerag index`"),
    transport: str = typer.Option("stdio", "--transport", "-t",
                                  help="stdio (an MCP client starts this command) or http (streamable HTTP)"),
    host: str = typer.Option("127.0.0.1", "--host", help="http: bind address (a non-loopback address needs an API key)"),
    port: int = typer.Option(8710, "--port", help="http: TCP port (0: any free one, announced on stderr)"),
    api_key_env: str = typer.Option(None, "--api-key-env",
                                    help="http: environment variable holding the API key clients must send"),
    modes: list[str] = typer.Option(None, "--sources", "-s", help="comma-separated source modes to mount (default: all)"),
    config: Path = typer.Option(None, "--config", help="a YAML file of McpSettings"),
    overrides: list[str] = typer.Option(None, "--set", help="override a setting: key.path=value (repeatable), "
                                        "e.g. model.model=bundled:qwen2.5-coder-1.5b"),
) -> None:
    """Serve the MCP tools search, ask and list_sources over an index (the `integrations` extra)."""
    from routerag.config import load_config
    from routerag.integrations.mcp_server import serve_mcp
    from routerag.integrations.mcp_tools import McpSettings

    given = given_names(ctx)
    chosen = [f"transport={transport}"] if "transport" in given else []  # a default never overrides --config
    settings = load_config(McpSettings, config, [*chosen, *server_overrides(host, port, api_key_env, overrides, given)])
    quiet_native_logs(False)  # llama.cpp's errors only, no loading bars (stderr is the client's log)
    serve_mcp(index_dir, settings, source_modes(modes), announce=announce)
