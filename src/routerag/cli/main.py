"""Entry point: imports every command module (each registers its commands on ``app``)."""

from __future__ import annotations

import importlib

from routerag.cli.app import app

# one module per group of commands; each owns its own heavy imports inside the command bodies
COMMAND_MODULES = [
    "routerag.cli.index_cmds",  # index, retrieve
    "routerag.cli.server_cmds",  # serve-retrieval, serve
    "routerag.cli.mcp_cmds",  # mcp
    "routerag.cli.eval_cmds",  # eval, report
    "routerag.cli.runs_cmds",  # runs compress, runs uncompress
    "routerag.cli.ask_cmds",  # ask, demo
    "routerag.cli.train_cmds",  # train, export-verl
    "routerag.cli.router_cmds",  # router labels, router train, router show
    "routerag.cli.policy_cmds",  # policies list, policies install
    "routerag.cli.routing_report_cmds",  # routing-report
    "routerag.cli.docs_cmds",  # docs reference, docs results-table
]


def _load() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(name)


def main() -> None:
    """Runs the command. Each command prints a :class:`~routerag.errors.RouteragError` as one
    ``error: ...`` line and exits 1 (``routerag.cli.app``); any other exception is a bug and keeps
    its traceback."""
    _load()
    app()


if __name__ == "__main__":
    main()
