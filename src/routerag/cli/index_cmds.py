"""``routerag index`` and ``routerag retrieve``: build/extend an index directory and query it.

(``serve-retrieval`` lives in ``routerag.cli.server_cmds``.) Heavy imports stay inside the
command bodies so ``routerag --help`` is fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer

from routerag.cli.app import app

if TYPE_CHECKING:
    from routerag.corpus.schema import Document
    from routerag.sources.base import RetrievalResponse


def _fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _split(values: list[str] | None) -> list[str]:
    """``--x a,b --x c`` -> ["a", "b", "c"]."""
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


def _load_documents(corpus: str, fmt: str) -> list["Document"]:
    """A corpus file, or a registered dataset name (every document of every source it has)."""
    path = Path(corpus)
    if path.exists():
        from routerag.corpus.loaders import load_corpus

        loaded = load_corpus(path, fmt)
        typer.echo(loaded.report.summary(), err=True)
        return loaded.docs
    from routerag.corpus.datasets import DataNotFoundError, load_dataset
    from routerag.registry import UnknownNameError

    try:
        dataset = load_dataset(corpus)
    except UnknownNameError as exc:
        _fail(f"{corpus}: no such file, and {exc}")
    except DataNotFoundError as exc:
        _fail(str(exc))
    docs = dataset.documents()
    if not docs:
        _fail(f"dataset {corpus!r} has no documents")
    typer.echo(f"dataset {dataset.name}: {len(docs)} documents", err=True)
    return docs


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
    import time

    from routerag import progress
    from routerag.cli.progress import RichProgress
    from routerag.config import ConfigError, load_config
    from routerag.corpus.readers import CorpusFormatError
    from routerag.index.bundle import CONFIG_NAME, build_index, load_index
    from routerag.index.manifest import IndexError_
    from routerag.index.settings import IndexSettings
    from routerag.registry import UnknownNameError

    names = _split(components)
    with progress.reporting(RichProgress()):  # one line per slow step (components, model loads)
        try:
            docs = _load_documents(corpus, fmt)
            t0 = time.perf_counter()
            if add:
                if engine != "local":
                    _fail("--add runs in this process; drop --engine (only full builds run on Ray)")
                if not out.is_dir():
                    _fail(f"{out}: no index to add to; build it first without --add")
                base = config if config is not None else out / CONFIG_NAME
                settings = load_config(IndexSettings, base, overrides)
                bundle = load_index(out, settings)
                added = bundle.add_documents(docs)
                extra = [name for name in names if name not in bundle.components]
                for name in extra:
                    bundle.add_component(name)
                typer.echo(
                    f"added {len(added)} new documents ({len(docs) - len(added)} already indexed)"
                    + (f" and the {', '.join(extra)} component" if extra else "")
                    + f" to {out}: {len(bundle.store)} documents, {', '.join(bundle.components)}"
                    + f" in {time.perf_counter() - t0:.1f}s"
                )
                return
            settings = load_config(IndexSettings, config, overrides)
            bundle = build_index(docs, out, settings, names or ("dense", "bm25"), overwrite=overwrite, engine=engine)
        except (ConfigError, CorpusFormatError, IndexError_, UnknownNameError, FileExistsError, ValueError) as exc:
            _fail(str(exc))
    typer.echo(
        f"indexed {len(bundle.store)} documents into {out} ({', '.join(bundle.components)}) "
        f"in {time.perf_counter() - t0:.1f}s"
    )


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
    from pydantic import ValidationError

    from routerag.index.bundle import load_index
    from routerag.index.manifest import IndexError_
    from routerag.sources.base import RetrievalError, RetrievalRequest

    try:
        bundle = load_index(index_dir)
    except IndexError_ as exc:
        _fail(str(exc))
    sources = bundle.sources()
    mounted = sources.names()
    wanted = _split(modes) or mounted
    unknown = [m for m in wanted if m not in mounted]
    if unknown:
        why = "; ".join(f"{m}: {bundle.unmounted[m]}" for m in unknown if m in bundle.unmounted)
        _fail(
            f"unknown mode {', '.join(unknown)}; mounted: {', '.join(mounted) or '(none)'}" + (f" ({why})" if why else ""),
            code=2,
        )
    try:
        request = RetrievalRequest(queries=[query], k=k, sources=wanted)
    except ValidationError as exc:
        _fail("; ".join(err["msg"].removeprefix("Value error, ") for err in exc.errors()), code=2)
    try:
        response = sources.retrieve(request)
    except RetrievalError as exc:
        _fail(str(exc))
    if as_json:
        sys.stdout.write(response.model_dump_json(indent=2) + "\n")
    else:
        _print_response(response)
