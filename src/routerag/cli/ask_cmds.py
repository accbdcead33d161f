"""``routerag ask`` (one question, readable trace) and ``routerag demo`` (the README's main job:
bundled model + bundled demo data, a handful of real multi-hop questions)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from routerag.cli.app import app

console = Console()

DEMO_COMPONENTS = ["dense", "bm25", "graph"]


def _eval_config(config: Optional[Path], overrides: list[str], **fields):
    from routerag.config import load_config
    from routerag.eval.config import EvalConfig

    base = load_config(EvalConfig, config, overrides)
    explicit = {k: v for k, v in fields.items() if v is not None}
    return base.model_copy(update=explicit)


def _context(cfg, index_dir: Optional[Path]):
    from routerag.corpus.datasets import load_dataset
    from routerag.eval.setup import build_sources
    from routerag.llm.factory import build_model
    from routerag.strategies import StrategyContext

    if index_dir is not None:
        from routerag.index.bundle import load_index

        sources = load_index(index_dir).sources(cfg.modes)
    else:
        sources, _ = build_sources(load_dataset(cfg.dataset), cfg)
    return StrategyContext(model=build_model(cfg.model), sources=sources)


def _strategy(cfg, context):
    from routerag.strategies import STRATEGIES

    cls = STRATEGIES.get(cfg.strategy)
    return cls(context, cls.Params.model_validate(cfg.params))


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="the question")],
    strategy: Annotated[str, typer.Option("--strategy", "-s", help="a registered strategy")] = "routerag",
    dataset: Annotated[Optional[str], typer.Option(help="index this dataset's corpus (default: the bundled demo)")] = None,
    index: Annotated[Optional[Path], typer.Option(help="a prebuilt index directory (routerag index)")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="YAML configuration (EvalConfig shape)")] = None,
    set_: Annotated[list[str], typer.Option("--set", help="override: key.path=value (repeatable)")] = [],
    as_json: Annotated[bool, typer.Option("--json", help="print the Trace as JSON")] = False,
) -> None:
    """Answer one question with a routing strategy and show its trace."""
    cfg = _eval_config(config, set_, strategy=strategy, dataset=dataset, components=None if index else DEMO_COMPONENTS)
    trace = _strategy(cfg, _context(cfg, index)).run(question)
    if as_json:
        typer.echo(trace.model_dump_json(indent=2))
    else:
        from routerag.cli.render import render_trace

        console.print(render_trace(trace))
    if trace.error:
        raise typer.Exit(1)


@app.command()
def demo(
    strategy: Annotated[str, typer.Option("--strategy", "-s", help="a registered strategy")] = "routerag",
    questions: Annotated[int, typer.Option("--questions", "-n", min=1, help="how many demo questions")] = 3,
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="YAML configuration (EvalConfig shape)")] = None,
    set_: Annotated[list[str], typer.Option("--set", help="override: key.path=value (repeatable)")] = [],
    as_json: Annotated[bool, typer.Option("--json", help="print one Trace JSON per line")] = False,
    policy: Annotated[bool, typer.Option("--policy/--untrained", help="routerag on the bundled 0.5B: apply the shipped SFT policy adapter (default) or run the untrained model")] = True,
) -> None:
    """Answer a handful of real multi-hop questions from the bundled demo data with the bundled
    model: builds (first run) or loads the demo index, then shows each routing trace and its cost."""
    from routerag.corpus.datasets import load_dataset
    from routerag.eval.metrics import exact_match, token_f1
    from routerag.llm.config import with_default_policy

    cfg = _eval_config(config, set_, strategy=strategy, dataset="demo", components=DEMO_COMPONENTS)
    if policy:
        cfg = cfg.model_copy(update={"model": with_default_policy(cfg.model, cfg.strategy)})
    data = load_dataset(cfg.dataset, n_questions=questions)
    with console.status("loading the demo index and the bundled model (first run: builds the index, joins the model)…"):
        context = _context(cfg, None)
    runner = _strategy(cfg, context)
    rows = []
    for q in data.questions:
        trace = runner.run(q)
        em, f1 = exact_match(trace.answer, q.answers), token_f1(trace.answer, q.answers)
        rows.append((q, trace, em, f1))
        if as_json:
            typer.echo(json.dumps({"qid": q.qid, "gold": q.answers, "em": em, "f1": f1, "trace": trace.model_dump(mode="json")}))
        else:
            from routerag.cli.render import render_trace

            console.print(render_trace(trace, gold=q.answers))
    if as_json:
        return
    table = Table(title=f"{strategy} on {len(rows)} demo questions")
    for column in ("qid", "EM", "F1", "turns", "modes", "tokens", "retrieval ms", "model s", "total s"):
        table.add_column(column)
    for q, trace, em, f1 in rows:
        modes = ",".join(f"{k}×{v}" for k, v in trace.retrieval_calls_by_source().items()) or "-"
        table.add_row(
            q.qid, f"{em:.0f}", f"{f1:.2f}", str(trace.retrieval_turns), modes,
            str(trace.prompt_tokens + trace.completion_tokens), f"{trace.retrieval_ms:.0f}",
            f"{trace.model_ms / 1000:.1f}", f"{trace.latency_ms / 1000:.1f}",
        )
    console.print(table)
