"""``routerag runs compress`` / ``routerag runs uncompress``: store finished evaluation runs as
``results.jsonl.xz`` (every reader and resume accept every form, the earlier ``results.jsonl.gz`` too; see
:mod:`routerag.api.runs`)."""

from __future__ import annotations

from pathlib import Path

import typer

from routerag.cli.app import RouteragTyper, app

runs_app = RouteragTyper(help="Maintain stored evaluation runs (compress finished ones).", no_args_is_help=True)
app.add_typer(runs_app, name="runs")


def _run_dirs(paths: list[Path]) -> list[Path]:
    """Each path is a run directory (it has run.json) or a folder searched for run directories."""
    from routerag.api.runs import RunsRequestError, find_run_dirs

    try:
        return find_run_dirs(paths)
    except RunsRequestError as exc:  # a usage error: exit 2
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


@runs_app.command("compress")
def compress_command(
    paths: list[Path] = typer.Argument(..., help="run directories, or folders holding them (searched recursively)"),
) -> None:
    """Replace each finished run's results.jsonl by results.jsonl.xz (verified before the plain
    file is removed; a results.jsonl.gz packed earlier is re-packed as xz). `routerag report` reads
    it as before; resuming the run decompresses it."""
    from routerag.api.runs import RunError, compress_run

    failed = 0
    plain_total = packed_total = 0
    for path in _run_dirs(paths):
        try:
            report = compress_run(path)
        except RunError as exc:
            typer.echo(f"error: {exc}", err=True)
            failed += 1
            continue
        plain_total += report.plain_bytes
        packed_total += report.packed_bytes
        state = "already compressed" if report.already else "re-packed gzip -> xz" if report.repacked else "compressed"
        typer.echo(f"{path}: {state}, {report.records} records, {report.plain_bytes:,} -> {report.packed_bytes:,} bytes")
    typer.echo(f"total {plain_total:,} -> {packed_total:,} bytes")
    if failed:
        raise typer.Exit(1)


@runs_app.command("uncompress")
def uncompress_command(
    paths: list[Path] = typer.Argument(..., help="run directories, or folders holding them (searched recursively)"),
) -> None:
    """Turn results.jsonl.xz (or .gz) back into results.jsonl (resume does this by itself; this is for
    reading the log with line tools)."""
    from routerag.api.runs import RunError, uncompress_run

    failed = 0
    for path in _run_dirs(paths):
        try:
            location = uncompress_run(path)
        except RunError as exc:
            typer.echo(f"error: {exc}", err=True)
            failed += 1
            continue
        typer.echo(f"{path}: {location.name}")
    if failed:
        raise typer.Exit(1)
