"""The Typer application object; command modules attach their commands to it.

Every command of :class:`RouteragTyper` runs inside one handler: a
:class:`~routerag.errors.RouteragError` (a refusal with its reason: an unknown name, bad
parameters, a configuration that cannot be used) is printed as one ``error: ...`` line and exits 1
(a command that wants another code for a refusal catches that subclass itself); Ctrl-C exits 130.
The CLI catches nothing else: any other exception is a bug and keeps its traceback."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import typer

from routerag.errors import RouteragError

F = TypeVar("F", bound=Callable[..., Any])


def refusals_as_errors(fn: F) -> F:
    """``fn`` with a ``RouteragError`` printed as ``error: ...`` (exit 1) and Ctrl-C as exit 130."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RouteragError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(130) from None

    return run  # type: ignore[return-value]


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code`` (2: a usage error)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def split_values(values: list[str] | None) -> list[str]:
    """A repeatable, comma-separated option's values: ``--x a,b --x c`` -> ["a", "b", "c"]."""
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


class RouteragTyper(typer.Typer):
    """A ``Typer`` whose commands run inside :func:`refusals_as_errors`."""

    def command(self, *args: Any, **kwargs: Any) -> Callable[[F], F]:  # type: ignore[override]
        register = super().command(*args, **kwargs)

        def decorator(fn: F) -> F:
            register(refusals_as_errors(fn))
            return fn

        return decorator


app = RouteragTyper(
    name="routerag",
    help="Adaptive, learned query routing for retrieval-augmented generation.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
