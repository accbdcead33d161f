"""``routerag ask`` (one question, readable trace) and ``routerag demo`` (the README's main job:
bundled model + bundled demo data, a handful of real multi-hop questions)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from routerag.cli.app import app

console = Console()

POLICY_HELP = ("routerag on the bundled 0.5B: apply the shipped SFT policy adapter (default) or run the untrained "
               "model; see routerag.api")


def _eval_config(config: Optional[Path], overrides: list[str], **fields):
    from routerag.config import load_config
    from routerag.eval.config import EvalConfig

    explicit = {k: v for k, v in fields.items() if v is not None}
    return load_config(EvalConfig, config, overrides, updates=explicit)  # params checked against the strategy's


def _components(index: Optional[Path]) -> Optional[list[str]]:
    from routerag.api import INTERACTIVE_COMPONENTS

    return None if index is not None else list(INTERACTIVE_COMPONENTS)


def _runner(cfg, policy: bool, index_dir: Optional[Path] = None):
    """The strategy ``cfg`` names, resolved through the front door (``routerag.api``), over the
    given index or one built over the dataset's corpus; also returns the index's folder and ``cfg``
    with the model configuration that runs it (defaults applied)."""
    from routerag.api import resolve_strategy
    from routerag.corpus.datasets import load_dataset
    from routerag.eval.setup import build_sources
    from routerag.llm.factory import build_model
    from routerag.strategies import StrategyContext

    resolved = resolve_strategy(cfg.strategy, cfg.params, cfg.model, shipped_policy=policy)
    if index_dir is not None:
        from routerag.index.bundle import load_index

        sources = load_index(index_dir).sources(cfg.modes)
    else:
        sources, manifests = build_sources(load_dataset(cfg.dataset), cfg)
        index_dir = manifests[0].parent if manifests else None
    assert resolved.model is not None
    context = StrategyContext(model=build_model(resolved.model), sources=sources)
    return resolved.build(context), index_dir, cfg.model_copy(update={"model": resolved.model})


@app.command()
def ask(
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
    from routerag.cli.progress import RichProgress

    _quiet_native_logs(verbose)
    cfg = _eval_config(config, set_, strategy=strategy, dataset=dataset, components=_components(index))
    with progress.reporting(RichProgress(Console(stderr=True))):
        runner, _, _ = _runner(cfg, policy, index)
        with progress.step(f"answering with {cfg.strategy}"):
            trace = runner.run(question)
    if as_json:
        typer.echo(trace.model_dump_json(indent=2))
    else:
        from routerag.cli.render import render_trace

        console.print(render_trace(trace))
    if trace.error:
        raise typer.Exit(1)


def _quiet_native_logs(verbose: bool) -> None:
    """llama.cpp's own log lines and the Hugging Face loading bars only with ``--verbose`` (the
    rich progress lines say what is loading); see ``set_native_logging``."""
    import logging
    import os

    from routerag.llm.llamacpp import set_native_logging

    set_native_logging(verbose)
    if not verbose:
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read when transformers is imported (later)
    else:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")


@app.command()
def demo(
    strategy: Annotated[str, typer.Option("--strategy", "-s", help="a registered strategy")] = "routerag",
    questions: Annotated[int, typer.Option("--questions", "-n", min=1, help="how many demo questions")] = 3,
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="YAML configuration (EvalConfig shape)")] = None,
    set_: Annotated[list[str], typer.Option("--set", help="override: key.path=value (repeatable)")] = [],
    as_json: Annotated[bool, typer.Option("--json", help="print one Trace JSON per line")] = False,
    policy: Annotated[bool, typer.Option("--policy/--untrained", help=POLICY_HELP)] = True,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="also show llama.cpp's own log and routerag's info log")] = False,
) -> None:
    """Answer a handful of real multi-hop questions from the bundled demo data with the bundled
    model: builds (first run) or loads the demo index, shows each routing trace, then a summary of
    what the policy did, what it cost and how the answers compare with the gold ones."""
    from routerag import progress
    from routerag.cli.progress import RichProgress
    from routerag.cli.render import DemoRow, render_demo_summary, render_trace
    from routerag.corpus.datasets import load_dataset
    from routerag.eval.metrics import exact_match, token_f1

    _quiet_native_logs(verbose)
    cfg = _eval_config(config, set_, strategy=strategy, dataset="demo", components=_components(None))
    data = load_dataset(cfg.dataset, n_questions=questions)
    rows: list[DemoRow] = []
    with progress.reporting(RichProgress(Console(stderr=True))):
        runner, index_dir, cfg = _runner(cfg, policy)
        for i, q in enumerate(data.questions, start=1):
            with progress.step(f"question {i}/{len(data.questions)}: {_clip(q.question, 60)}"):
                trace = runner.run(q)
            row = DemoRow(question=q, trace=trace, em=exact_match(trace.answer, q.answers), f1=token_f1(trace.answer, q.answers))
            rows.append(row)
            if as_json:
                typer.echo(json.dumps({"qid": q.qid, "gold": q.answers, "em": row.em, "f1": row.f1, "trace": trace.model_dump(mode="json")}))
            else:
                console.print(render_trace(trace, gold=q.answers))
    if as_json:
        return
    console.print(render_demo_summary(rows, cfg, index_dir))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"

