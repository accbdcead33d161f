"""The options every serving command shares (``routerag serve``, ``serve-retrieval``, ``mcp``):
the settings overrides from ``--host/--port/--api-key-env/--set``, the ``--sources`` list and the
announcement of where the server listens."""

from __future__ import annotations

import json
import os
from collections.abc import Collection

import typer

from routerag.errors import RouteragError

__all__ = ["announce", "server_overrides", "source_modes"]


def server_overrides(host: str, port: int, api_key_env: str | None, overrides: list[str] | None,
                     given: Collection[str] = ("host", "port")) -> list[str]:
    """The ``key=value`` settings overrides of a server's ``--host`` and ``--port`` (only those named
    in ``given``, the options given on the command line: a default never overrides ``--config``),
    ``--set`` options and
    ``--api-key-env`` (the key itself, read from that environment variable). Raises
    :class:`RouteragError` when ``--api-key-env`` names a variable that is unset or empty."""
    # JSON strings are YAML scalars: a key such as "123" or "a: b" stays a string
    result = [f"host={json.dumps(host)}"] if "host" in given else []
    result += [f"port={port}"] if "port" in given else []
    result += list(overrides or [])
    if api_key_env:
        key = os.environ.get(api_key_env)
        if not key:
            raise RouteragError(f"--api-key-env {api_key_env}: that environment variable is not set or empty")
        result.append(f"api_key={json.dumps(key)}")
    return result


def source_modes(values: list[str] | None) -> list[str] | None:
    """The source modes of repeated, comma-separated ``--sources`` options; None (mount all) when none is given."""
    return [m.strip() for value in values or [] for m in value.split(",") if m.strip()] or None


def announce(line: str) -> None:
    """Print a server's announcement (where it listens) on stderr, keeping stdout for the protocol or results."""
    typer.echo(line, err=True)
