"""The Typer application object; command modules attach their commands to it."""

import typer

app = typer.Typer(
    name="routerag",
    help="Adaptive, learned query routing for retrieval-augmented generation.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
