"""Which options were given on the command line: a value a command line names overrides its
``--config`` file, a default never does (the file's value, else the setting's own default, wins)."""

from __future__ import annotations

import typer

__all__ = ["given_names"]

_GIVEN = ("COMMANDLINE", "ENVIRONMENT")  # click's ParameterSource names (Typer may vendor its own click)


def given_names(ctx: typer.Context) -> frozenset[str]:
    """The parameters of the running command that were given (on the command line or by an
    environment variable) rather than left at their default."""
    sources = {name: ctx.get_parameter_source(name) for name in ctx.params}
    return frozenset(name for name, source in sources.items() if source is not None and source.name in _GIVEN)
