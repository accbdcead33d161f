"""``routerag ask`` (one question, readable trace) and ``routerag demo`` (the README's main job:
bundled model + bundled demo data, a handful of real multi-hop questions)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from routerag.cli.app import app
from routerag.cli.given import given_names
from routerag.cli.native_logs import quiet_native_logs

console = Console()

POLICY_HELP = ("a strategy with a shipped policy on a bundled base (routerag on the 0.5B and the 1.5B): apply that "
               "policy adapter (default) or run the untrained model; see routerag.api")


def _ask_params(config: Optional[Path], overrides: list[str], index: Optional[Path], policy: bool, *,
                strategy: str, strategy_given: bool, **fields):
    """The front door's ``AskParams``: the configuration file and ``--set`` overrides, then the
    options given on the command line; a ``strategy`` not given (``--strategy`` left at its
    default) applies only where the file names none."""
    from routerag.api.asking import ask_params

    chosen = {"strategy": strategy}
    return ask_params(config, overrides, index_dir=index, shipped_policy=policy, defaults=None if strategy_given else chosen,
                      **(chosen if strategy_given else {}), **fields)


@app.command()
def ask(
    ctx: typer.Context,
    question: Annotated[str, typer.Argument(help="the question")],
    strategy: Annotated[str, typer.Option("--strategy", "-s", help="a registered strategy")] = "routerag",
    dataset: Annotated[Optional[str], typer.Option(help="index this dataset's corpus (default: the bundled demo)")] = None,
    index: Annotated[Optional[Path], typer.Option(help="a prebuilt index directory (routerag index)")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="YAML configuration (EvalConfig shape)")] = None,
    set_: Annotated[list[str], typer.Option("--set", help="override: key.path=value (repeatable)")] = [],
    as_json: Annotated[bool, typer.Option("--json", help="print the Trace as JSON")] = False,
    policy: Annotated[bool, typer.Option("--policy/--untrained", help=POLICY_HELP)] = True,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="also show llama.cpp's own log and routerag's info log")] = False,
) -> None:
    """Answer one question with a routing strategy and show its trace."""
    from routerag import progress
    from routerag.api import open_asker
    from routerag.cli.progress import RichProgress

    quiet_native_logs(verbose)
    params = _ask_params(config, set_, index, policy, strategy=strategy, strategy_given="strategy" in given_names(ctx), dataset=dataset)
    with progress.reporting(RichProgress(Console(stderr=True))):
        asker = open_asker(params)
        with progress.step(f"answering with {asker.config.strategy}"):
            trace = asker.ask(question)
    if as_json:
        typer.echo(trace.model_dump_json(indent=2))
    else:
        from routerag.cli.render import render_trace

        console.print(render_trace(trace))
    if trace.error:
        raise typer.Exit(1)


@app.command()
def demo(
    ctx: typer.Context,
    strategy: Annotated[str, typer.Option("--strategy", "-s", help="a registered strategy")] = "routerag",
    questions: Annotated[int, typer.Option("--questions", "-n", min=1, help="how many demo questions")] = 3,
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="YAML configuration (EvalConfig shape)")] = None,
    set_: Annotated[list[str], typer.Option("--set", help="override: key.path=value (repeatable)")] = [],
    as_json: Annotated[bool, typer.Option("--json", help="print one Trace JSON per line")] = False,
    policy: Annotated[bool, typer.Option("--policy/--untrained", help=POLICY_HELP)] = True,
    compare: Annotated[Optional[str], typer.Option(
        "--compare", help="also answer each question with this strategy (e.g. vanilla) on the same model and index, "
        "and show what the policy changes: answers, searches, sources, tokens, seconds")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="also show llama.cpp's own log and routerag's info log")] = False,
) -> None:
    """Answer a handful of real multi-hop questions from the bundled demo data with the bundled
    model: builds (first run) or loads the demo index, shows each routing trace, then a summary of
    what the policy did, what it cost and how the answers compare with the gold ones."""
    from routerag import progress
    from routerag.api import open_asker
    from routerag.api.asking import ask_questions
    from routerag.cli.progress import RichProgress
    from routerag.cli.render import DemoRow, render_demo_compare, render_demo_summary, render_trace

    quiet_native_logs(verbose)
    params = _ask_params(config, set_, None, policy, strategy=strategy, strategy_given="strategy" in given_names(ctx), dataset="demo")
    other = _ask_params(config, set_, None, policy, strategy=compare, strategy_given=True, dataset="demo") if compare else None
    picked = ask_questions(params, questions)
    rows: list[DemoRow] = []
    other_rows: list[DemoRow] = []
    with progress.reporting(RichProgress(Console(stderr=True))):
        asker = open_asker(params)
        other_asker = open_asker(other) if other is not None else None
        for i, q in enumerate(picked, start=1):
            for who, rows_of in ((asker, rows), (other_asker, other_rows)):
                if who is None:
                    continue
                with progress.step(f"question {i}/{len(picked)} with {who.config.strategy}: {_clip(q.question, 60)}"):
                    row = DemoRow.of(q, who.ask(q))
                rows_of.append(row)
                if as_json:
                    typer.echo(json.dumps({"qid": q.qid, "strategy": who.config.strategy, "gold": q.answers, "em": row.em,
                                           "f1": row.f1, "trace": row.trace.model_dump(mode="json")}))
                else:
                    console.print(render_trace(row.trace, gold=q.answers))
    if as_json:
        return
    console.print(render_demo_summary(rows, asker.config, asker.index_dir))
    if other_asker is not None:
        console.print(render_demo_compare(rows, other_rows, asker.config, other_asker.config))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"

