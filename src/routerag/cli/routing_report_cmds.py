"""``routerag routing-report``: is routing worth it on my data? Every mode or source of an index
against the per-question oracle, the best fixed choice, retrieving from all and the routers, in
recall@k, milliseconds and evidence tokens (``routerag.api.routing_report``)."""

from __future__ import annotations

from pathlib import Path

import typer

from routerag.cli.app import app, fail, split_values


@app.command("routing-report")
def routing_report_command(
    dataset: str = typer.Option(..., "--dataset", "-d", help="the questions, with gold answers: a dataset name (2wiki, "
                                "law-med, demo-tables, ...) or file:<path> (a question file or a dataset folder)"),
    out: Path = typer.Option(..., "--out", "-o", help="the report folder (routing-report.md/.json/.png, outcomes.jsonl); "
                             "an existing one is resumed"),
    index_dir: Path = typer.Option(None, "--index", help="a prebuilt index directory (`routerag index`); default: the "
                                   "dataset's own cached index, as `routerag eval` builds it"),
    choices: list[str] = typer.Option(None, "--choice", "-c", help="modes or sources to compare, comma-separated or "
                                      "repeated (default: every one the index mounts; two or more)"),
    k: int = typer.Option(5, "-k", "--k", help="a choice succeeds when its top k hits hold a gold answer"),
    limit: int = typer.Option(None, "--limit", "-n", help="evenly spaced questions (default: all)"),
    components: list[str] = typer.Option(None, "--components", help="the dataset's cached index: its components, "
                                         "comma-separated (default: dense,bm25; add graph for the graph modes)"),
    source_mode: str = typer.Option("passage", "--source-mode", help="multi-source datasets: the mode each named source "
                                    "is served with (passage, bm25)"),
    learned: bool = typer.Option(True, "--learned/--no-learned", help="cross-validate the learned router (scikit-learn, "
                                 "the `router` extra)"),
    keyword: bool = typer.Option(True, "--keyword/--no-keyword", help="fit keyword rules per fold (the no-model "
                                 "yardstick: words that predict a choice) and report them cross-validated"),
    rules: Path = typer.Option(None, "--rules", help="your own keyword rules (YAML: rules: [{pattern, choice}, ...], "
                               "default), reported as written beside the fitted ones"),
    folds: int = typer.Option(5, "--folds", min=2, help="cross-validation folds of the learned router and the keyword "
                              "rules (grouped by question)"),
    c: float = typer.Option(1.0, "--C", help="the learned router's inverse L2 strength"),
    inputs: str = typer.Option("embedding+features", "--inputs", help="what the learned router reads: 'embedding+features' "
                               "or 'features' (the cheap features alone, for a few dozen questions)"),
    seed: int = typer.Option(0, "--seed", help="seed of the paired bootstrap"),
    plot: bool = typer.Option(True, "--plot/--no-plot", help="also write the PNG figure (matplotlib, the `eval` extra)"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="show a progress bar"),
) -> None:
    """Is routing worth it on my data? Every mode or source against the oracle and the routers.

    Recall@k, retrieval ms and evidence tokens of each mode or source, the per-question oracle, the
    best fixed choice, retrieving from all, the profile router, keyword rules (fitted, and your
    own with --rules) and the learned router (cross-validated by question); Markdown, JSON and a
    PNG figure. Resumable."""
    from contextlib import nullcontext

    from routerag import progress as progress_events
    from routerag.api.routing_report import RoutingReportError, RoutingReportParams, routing_report
    from routerag.cli.progress import RichProgress
    from routerag.config import ConfigError, validated
    from routerag.registry import UnknownNameError

    try:
        params = validated(
            RoutingReportParams, dataset=dataset, out=out, index_dir=index_dir, choices=split_values(choices), k=k, limit=limit,
            components=split_values(components) or ["dense", "bm25"], source_mode=source_mode, seed=seed, plot=plot,
            learned={"folds": folds, "c": c, "inputs": inputs} if learned else None,
            keyword={"folds": folds} if keyword else None, rules=rules,
        )
    except ConfigError as exc:  # a usage error: exit 2
        fail(str(exc), 2)
    try:
        with progress_events.reporting(RichProgress()) if progress else nullcontext():
            made = routing_report(params)
    except (RoutingReportError, UnknownNameError) as exc:  # a usage error: exit 2
        fail(str(exc), 2)
    except KeyboardInterrupt:
        fail(f"interrupted; the questions searched are kept in {out} - run the same command to resume", 130)
    typer.echo(f"{made.report.verdict}.")
    typer.echo(f"{made.report.questions} questions ({made.resumed} resumed, {made.measured} searched now)", err=True)
    if made.plot_skipped:
        typer.echo(made.plot_skipped, err=True)
    for path in made.files.values():
        typer.echo(f"wrote {path}", err=True)
