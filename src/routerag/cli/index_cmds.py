"""``routerag index``, ``routerag verify-index`` and ``routerag retrieve``: build/extend an index directory, check its files, query it.

(``serve-retrieval`` lives in ``routerag.cli.server_cmds``.) Heavy imports stay inside the
command bodies so ``routerag --help`` is fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from routerag.cli.app import app, fail, split_values

if TYPE_CHECKING:
    from routerag.sources.base import RetrievalResponse


@app.command("index")
def index_command(
    corpus: str = typer.Argument(..., help="a corpus file (JSON, JSONL, CSV, ...) or a dataset name (2wiki, musique, ...)"),
    out: Path = typer.Option(..., "--out", "-o", help="the index directory to create (or extend with --add)"),
    components: list[str] = typer.Option(
        None, "--components", "-c", help="comma-separated index components (default: dense,bm25)"
    ),
    config: Path = typer.Option(None, "--config", help="a YAML file of IndexSettings"),
    overrides: list[str] = typer.Option(None, "--set", help="override a setting: key.path=value (repeatable)"),
    add: bool = typer.Option(
        False, "--add", help="add the corpus's new documents (and any new --components) to an existing index"
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace an existing index directory"),
    fmt: str = typer.Option("auto", "--format", help="corpus file format (default: detected)"),
    engine: str = typer.Option(
        "local", "--engine", help="where dense vectors are computed: local (this process) or ray (a Ray Data pipeline; "
        "the `scale` extra; joins the cluster at RAY_ADDRESS, else starts Ray locally)"
    ),
) -> None:
    """Build an index directory (documents + dense/bm25/graph components) from a corpus."""
    from routerag import progress
    from routerag.api import IndexParams, build_index
    from routerag.cli.progress import RichProgress

    params = IndexParams(corpus=corpus, out=out, components=split_values(components), config=config,
                         overrides=list(overrides or []), add=add, overwrite=overwrite, format=fmt,
                         engine=engine)
    with progress.reporting(RichProgress()):  # one line per slow step (components, model loads)
        result = build_index(params)
    typer.echo(result.source, err=True)
    if result.added is not None:
        typer.echo(
            f"added {result.added} new documents ({result.already} already indexed)"
            + (f" and the {', '.join(result.new_components)} component" if result.new_components else "")
            + f" to {out}: {result.documents} documents, {', '.join(result.components)}"
            + f" in {result.seconds:.1f}s"
        )
        return
    typer.echo(
        f"indexed {result.documents} documents into {out} ({', '.join(result.components)}) in {result.seconds:.1f}s"
    )


@app.command("convert-docstore")
def convert_docstore_command(
    index_dir: Path = typer.Argument(..., help="an index directory built by `routerag index`"),
    to: str = typer.Option("arrow", "--to", help="arrow (one memory-mapped Arrow file) or jsonl (JSON lines)"),
) -> None:
    """Rewrite an index's documents as a memory-mapped Arrow file (corpora beyond RAM) or back as
    JSON lines; the components (vectors, BM25, graph) are untouched: row i stays document i."""
    import time

    from routerag.api.indexing import convert_docstore

    t0 = time.perf_counter()
    changed = convert_docstore(index_dir, to)
    if not changed:
        typer.echo(f"{index_dir}: its documents are already stored as {to}")
        return
    typer.echo(f"converted the documents of {index_dir} to {to} in {time.perf_counter() - t0:.1f}s")


@app.command("verify-index")
def verify_index_command(
    index_dir: Path = typer.Argument(..., help="an index directory built by `routerag index`"),
) -> None:
    """Hash every file of an index, its vector files too, against the sizes and sha256 recorded when
    it was built (loading checks sizes and the small files only); a corrupt file is named, exit 1."""
    from routerag.api import verify_index

    result = verify_index(index_dir)
    for folder in result.abandoned:
        typer.echo(f"{folder}: left by an index build that was killed; the next build of this index removes it")
    if result.files == 0:
        typer.echo(f"{index_dir}: built without content hashes, nothing to check; rebuild it to have them")
        return
    typer.echo(f"{index_dir}: {result.files} files intact ({result.bytes_hashed / 2**20:,.1f} MiB hashed "
               f"in {result.seconds:.1f}s)")


def _print_response(response: "RetrievalResponse", width: int = 160) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for name, results in response.results.items():
        for result in results:
            table = Table(title=f"{name}  ({result.latency_ms:.1f} ms)", title_justify="left", expand=False)
            table.add_column("#", justify="right")
            table.add_column("score", justify="right")
            table.add_column("title", overflow="fold", max_width=32)
            table.add_column("text", overflow="fold")
            for hit in result.hits:
                text = hit.text if len(hit.text) <= width else hit.text[: width - 1] + "…"
                table.add_row(str(hit.rank), f"{hit.score:.3f}", hit.title, text)
            if not result.hits:
                table.add_row("-", "-", "(no hits)", "")
            console.print(table)


@app.command("retrieve")
def retrieve_command(
    index_dir: Path = typer.Argument(..., help="an index directory built by `routerag index`"),
    query: str = typer.Argument(..., help="the query text"),
    modes: list[str] = typer.Option(
        None, "--mode", "-m", help="source modes, comma-separated or repeated (default: every mounted one)"
    ),
    k: int = typer.Option(5, "-k", "--k", help="hits per mode"),
    as_json: bool = typer.Option(False, "--json", help="print the RetrievalResponse as JSON"),
) -> None:
    """Retrieve the top-k hits for a query from each mode of an index."""
    from routerag.api.indexing import RetrievalRequestError, retrieve

    try:
        response = retrieve(index_dir, query, k, split_values(modes))
    except RetrievalRequestError as exc:  # a usage error: exit 2
        fail(str(exc), code=2)
    if as_json:
        sys.stdout.write(response.model_dump_json(indent=2) + "\n")
    else:
        _print_response(response)
