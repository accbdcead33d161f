"""``routerag docs reference`` / ``routerag docs results-table``: the documentation generated from
the code (reference pages, :mod:`routerag.cli.reference`) and from the stored runs (the README's
results and training tables, :mod:`routerag.eval.readme_tables`). ``--check`` writes nothing and exits 1 when
a page differs."""

from __future__ import annotations

from pathlib import Path

import typer

from routerag.cli.app import RouteragTyper, app

docs_app = RouteragTyper(help="Regenerate the documentation made from the code and the stored runs.", no_args_is_help=True)
app.add_typer(docs_app, name="docs")


@docs_app.command("reference")
def reference_command(
    out: Path = typer.Option(Path("docs/reference"), "--out", "-o", help="folder of cli.md, config.md and http-api.md"),
    check: bool = typer.Option(False, "--check", help="write nothing; exit 1 when a page differs from the code"),
) -> None:
    """Write the CLI, configuration and HTTP API reference pages from the code."""
    from routerag.cli.reference import write_pages

    changed = write_pages(out, check=check)
    for path in changed:
        typer.echo(f"{'differs' if check else 'wrote'}: {path}", err=True)
    if check and changed:
        typer.echo("run `routerag docs reference` to regenerate them", err=True)
        raise typer.Exit(1)


@docs_app.command("results-table")
def results_table_command(
    readme: Path = typer.Option(Path("README.md"), "--readme", help="the file whose results markers receive the table"),
    spec: Path = typer.Option(Path("docs/results/readme-table.yaml"), "--spec", help="which runs make the table"),
    training_spec: Path = typer.Option(Path("docs/results/training-table.yaml"), "--training-spec",
                                       help="which runs make the training table (between the training markers)"),
    check: bool = typer.Option(False, "--check", help="write nothing; exit 1 when the table differs from the runs"),
) -> None:
    """Write the README's results and training tables (between their markers) from the stored runs."""
    from routerag.eval.readme_tables import update_readme

    changed = update_readme(readme, spec, check=check, training_spec=training_spec)
    typer.echo(f"{readme}: {'differs from the runs' if check and changed else 'updated' if changed else 'up to date'}", err=True)
    if check and changed:
        typer.echo("run `routerag docs results-table` to regenerate it", err=True)
        raise typer.Exit(1)
