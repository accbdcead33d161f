"""``routerag eval`` (run or resume an evaluation) and ``routerag report`` (tables, comparisons and
plots over stored runs). Heavy imports stay inside the command bodies."""

from __future__ import annotations

from pathlib import Path

import typer

from routerag.cli.app import app, fail, split_values


@app.command("eval")
def eval_command(
    dataset: str = typer.Option(None, "--dataset", "-d", help="dataset name (2wiki, musique, hotpotqa, law-med, ...) or file:<path>"),
    strategy: str = typer.Option(None, "--strategy", "-s", help="strategy name (routerag, graphrag-r1, r1-router, realroute, vanilla, ...)"),
    limit: int = typer.Option(None, "--limit", "-n", help="evenly spaced questions to evaluate (default: the config's, 200)"),
    all_questions: bool = typer.Option(False, "--all", help="evaluate every question of the dataset"),
    config: Path = typer.Option(None, "--config", help="a YAML file of EvalConfig (model, index, params, metrics, ...)"),
    overrides: list[str] = typer.Option(None, "--set", help="override a setting: key.path=value (repeatable), e.g. params.max_turns=4"),
    out: Path = typer.Option(None, "--out", "-o", help="the run directory (default: runs/<dataset>-<strategy>-<n>); an existing one is resumed"),
    concurrency: int = typer.Option(1, "--concurrency", "-j", min=1, help="questions answered in parallel (served models)"),
    retry_errors: bool = typer.Option(False, "--retry-errors", help="on resume, answer again the questions that failed with an error"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="show a progress bar"),
    order: str = typer.Option("spread", "--order", help="spread: answer the sample in bit-reversed order, so an interrupted "
                              "run's finished questions are spread over the sample; sample: in sample order"),
    engine: str = typer.Option("thread", "--engine", help="thread: answer in this process (-j threads); ray: a Ray Data "
                               "pipeline over -j actors, on the cluster named by RAY_ADDRESS or a local Ray (the scale extra)"),
    actor_cpus: float = typer.Option(1.0, "--actor-cpus", min=0, help="--engine ray: CPUs reserved per actor (e.g. 0.25 for served models)"),
) -> None:
    """Evaluate a strategy on a dataset: resumable, one JSON record per question, a summary at the end."""
    from routerag.api.evaluating import ENGINES, EvaluateParams, default_run_dir, eval_config, evaluate, results_path
    from routerag.cli.progress import RichProgress
    from routerag.registry import UnknownNameError

    if engine not in ENGINES:
        fail(f"unknown engine {engine!r}; valid: {', '.join(ENGINES)}", 2)

    run_path = out
    sets = list(overrides or [])
    if dataset is not None:
        sets.append(f"dataset={dataset}")
    if strategy is not None:
        sets.append(f"strategy={strategy}")
    if all_questions:
        sets.append("limit=null")
    elif limit is not None:
        sets.append(f"limit={limit}")
    try:
        cfg = eval_config(config, sets)
        run_path = out or default_run_dir(cfg)
        typer.echo(f"run directory: {run_path}", err=True)
        result = evaluate(EvaluateParams(config=cfg, out=run_path, concurrency=concurrency, retry_errors=retry_errors,
                                         progress=progress, order=order, engine=engine, actor_cpus=actor_cpus),  # type: ignore[arg-type]
                          listener=RichProgress() if progress else None)
    except UnknownNameError as exc:  # a usage error: exit 2
        fail(str(exc), 2)
    except KeyboardInterrupt:
        fail(f"interrupted; finished questions are kept in {run_path} - run the same command to resume", 130)
    outcome = result.outcome
    if outcome.recovery.repaired:
        typer.echo(f"warning: {outcome.recovery.message(results_path(run_path))}", err=True)
    s = outcome.summary
    scores = "  ".join(f"{name} {100 * value:.1f}" for name, value in s.metrics.items())
    typer.echo(
        f"{s.label} on {s.dataset}: {s.n_done}/{s.n_questions} questions "
        f"({outcome.skipped} resumed, {outcome.ran} answered now, {s.n_errors} errors)\n"
        f"  {scores}\n"
        f"  retrieval turns {s.cost.retrieval_turns:.2f}  tokens {s.cost.total_tokens:.0f}  latency {s.cost.latency_ms / 1000:.2f}s"
        + (f"\n  routing accuracy {100 * s.routing.accuracy:.1f} (n={s.routing.n})" if s.routing else "")
    )
    typer.echo(f"results: {result.results_path}")


@app.command("report")
def report_command(
    runs: list[Path] = typer.Argument(..., help="run directories (the first run per dataset is the baseline of comparisons unless --baseline)"),
    baseline: str = typer.Option(None, "--baseline", "-b", help="label (strategy) of the run every other run is compared with"),
    out: Path = typer.Option(Path("report"), "--out", "-o", help="folder for report.md, CSV/JSON tables and plots"),
    metrics: list[str] = typer.Option(None, "--metrics", "-m", help="table metrics, comma-separated (default: em,f1)"),
    plot_metric: str = typer.Option("em", "--plot-metric", help="metric of the plots"),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="also write PNG figures"),
    seed: int = typer.Option(0, "--seed", help="seed of the paired bootstrap"),
) -> None:
    """Tables in the papers' layout, paired bootstrap comparisons and plots over stored runs."""
    from routerag.api.runs import ReportRequestError, report

    try:
        made = report(runs, out, metrics=split_values(metrics), baseline=baseline, plot_metric=plot_metric, plots=plots, seed=seed)
    except ReportRequestError as exc:  # a usage error: exit 2
        fail(str(exc), 2)
    typer.echo(made.markdown)
    for path in made.files.values():
        typer.echo(f"wrote {path}", err=True)
