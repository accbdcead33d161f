"""``routerag train RECIPE`` (GRPO / SFT recipes over TRL) and ``routerag export-verl`` (training data
for verl / Search-R1). Heavy imports stay inside the command bodies."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import typer

from routerag.cli.app import app, fail

# the recipe names, written out so that `routerag --help` does not import the training stack
# (0.06 s -> 0.4 s); tests/integration/test_train_recipes.py checks it against the RECIPES registry
RECIPE_HELP = "routerag-two-stage | graphrag-r1 | r1-router-step | r1-router-sft | routerag-sft | routerag-rft"


@app.command("train")
def train_command(
    recipe: str = typer.Argument(..., help=RECIPE_HELP),
    config: Path = typer.Option(None, "--config", help="a YAML file of the recipe's configuration (see configs/train/; base: FILE layers one on another)"),
    overrides: list[str] = typer.Option(None, "--set", help="override a setting: key.path=value (repeatable), e.g. grpo.max_steps=10"),
    out: Path = typer.Option(None, "--out", "-o", help="run directory (default: the config's output_dir); an existing one is resumed"),
    dry_run: bool = typer.Option(False, "--dry-run", help="validate and print the resolved configuration, train nothing"),
) -> None:
    """Train a routing policy with one of the seed papers' recipes."""
    import yaml

    from routerag.api import train
    from routerag.config import ConfigError
    from routerag.registry import UnknownNameError
    from routerag.train.config import load_train_config
    from routerag.train.recipes import RECIPES

    if recipe not in RECIPES:
        fail(f"unknown recipe {recipe!r}; valid: {', '.join(RECIPES.names())}")
    items = [*(overrides or []), f"recipe={recipe}"]
    if out is not None:
        items.append(f"output_dir={out}")
    try:
        cfg = load_train_config(config, items)  # reward names and params are checked here
    except (ConfigError, UnknownNameError) as exc:  # a usage error: exit 2
        fail(str(exc), 2)
    if dry_run:
        typer.echo(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
        return
    summary = train(cfg)
    typer.echo(f"trained {summary.steps} steps ({', '.join(summary.phases)}); run in {summary.output_dir}")
    typer.echo(f"metrics: {summary.metrics_path}")
    if summary.curves_path:
        typer.echo(f"curves:  {summary.curves_path}")


@app.command("export-verl")
def export_verl_command(
    dataset: str = typer.Option(..., "--dataset", "-d", help="routerag dataset name or file:<path>"),
    out: Path = typer.Option(None, "--out", "-o", help="parquet file to write (default: <out-dir>/<dataset>.parquet)"),
    out_dir: Path = typer.Option(None, "--out-dir", help="folder of the default file name (default: $ROUTERAG_VERL_DATA, else "
                                 "data/verl; where configs/train/verl/ reads)"),
    split: str = typer.Option("train", help="split name recorded in extra_info"),
    limit: int = typer.Option(None, "--limit", "-n", help="evenly spaced questions to keep"),
    exclude: list[str] = typer.Option(["2wiki"], "--exclude", help="evaluation datasets whose questions are dropped (repeatable)"),
) -> None:
    """Write training questions in the verl / Search-R1 parquet schema (reward: routerag.train.export_verl.compute_score)."""
    from routerag.api.training import export_verl

    path, rows, dropped = export_verl(dataset, out, out_dir=out_dir, split=split, limit=limit, exclude=exclude)
    typer.echo(f"wrote {rows} rows to {path} ({dropped} dropped as overlapping {', '.join(exclude)})")


@app.command("export-lora-gguf")
def export_lora_gguf_command(
    adapter: Path = typer.Argument(..., help="a saved PEFT LoRA adapter directory (adapter_config.json + adapter_model.safetensors)"),
    out: Path = typer.Option(..., "--out", "-o", help="adapter GGUF to write"),
    base: str = typer.Option("bundled:qwen2.5-coder-0.5b", "--base", help="the base model's GGUF (a path or bundled: name) the adapter was trained on"),
    dtype: str = typer.Option("f16", "--dtype", help="f16 | f32"),
) -> None:
    """Export a PEFT LoRA adapter as a llama.cpp LoRA adapter GGUF (for --set model.lora_path=...)."""
    from routerag.api.training import export_lora_gguf

    info = export_lora_gguf(adapter, out, base=base, dtype=dtype)
    typer.echo(f"wrote {info.path}: {info.tensors} tensors, rank {info.rank}, alpha {info.alpha:g}, {info.architecture}")


@app.command("export-lora-peft")
def export_lora_peft_command(
    adapter: str = typer.Argument("policy:routerag-sft-qwen2.5-coder-0.5b",
                                  help="a llama.cpp adapter GGUF, or policy:NAME (a shipped policy; default: the shipped one)"),
    out: Path = typer.Option(..., "--out", "-o", help="PEFT adapter folder to write (adapter_config.json + adapter_model.safetensors)"),
    base: str = typer.Option("bundled:qwen2.5-coder-0.5b", "--base", help="the base model's GGUF (a path or bundled: name) the adapter was trained on"),
    base_model: str = typer.Option("Qwen/Qwen2.5-Coder-0.5B-Instruct", "--base-model",
                                   help="HF id of the base model, recorded as base_model_name_or_path (what vLLM serves)"),
) -> None:
    """Export a llama.cpp LoRA adapter GGUF as a PEFT adapter folder (vLLM --lora-modules NAME=FOLDER)."""
    from routerag.api.training import export_lora_peft

    info = export_lora_peft(adapter, out, base=base, base_model=base_model)
    typer.echo(f"wrote {info.path}: {info.tensors} tensors, rank {info.rank}, alpha {info.alpha:g}, "
               f"modules {', '.join(info.target_modules)}, layers {info.layers[0]}-{info.layers[-1]}")


@app.command("golden")
def golden_command(
    out: Path = typer.Option(..., "--out", "-o", help="folder for golden.jsonl.gz and golden_stats.json"),
    sources: list[str] = typer.Option(
        ["hotpotqa-distractor-train", "musique", "hotpotqa"], "--source", "-s",
        help="golden trajectory sources (repeatable): hotpotqa-distractor-train, musique, hotpotqa, r1router"),
    exclude: list[str] = typer.Option(
        ["2wiki", "musique:50", "hotpotqa-distractor"], "--exclude",
        help="evaluation sets whose questions are dropped (NAME or NAME:N evenly spaced; repeatable)"),
    ground: bool = typer.Option(True, "--ground/--no-ground", help="observations from real top-k retrieval over each dataset's "
                                "cached evaluation index (dense + BM25 + graph), the gold paragraph kept"),
    k: int = typer.Option(3, "--k", help="documents per search (RouteRAG release: 3)"),
    # the values of train.golden.grounding.GroundingRouting (not imported here: it pulls the golden package)
    routing: Literal["planned", "outcome"] = typer.Option("planned", "--routing", help="planned: each hop's planned mode (first passage, bridge "
                                "graph), another mode only when it misses the gold; outcome: the cheapest mode that "
                                "returns the gold, hops whose gold already came back left out"),
    rerender: Path = typer.Option(None, "--rerender", help="instead of building: re-render this stored set (a folder of "
                                  "golden.jsonl.gz) in --protocol, each row's observations from that strategy's episode over "
                                  "its own dataset's index (--source and --routing are not read)"),
    protocol: str = typer.Option("graphrag-r1", "--protocol", help="with --rerender: the tag protocol (strategy) to render in"),
    params: list[str] = typer.Option(None, "--param", help="with --rerender: a parameter of that strategy's episode, "
                                     "key=value (repeatable), e.g. evidence=text3+graph10"),
) -> None:
    """Build golden RouteRAG trajectories from gold decompositions / supporting facts, with statistics;
    or re-render a stored set in another protocol (``--rerender``)."""
    import shlex
    import sys

    from routerag.api.training import build_golden, rerender_golden

    command = "routerag " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    if rerender is not None:
        pairs = [p.partition("=") for p in params or []]
        if any(not eq for _, eq, _ in pairs):
            fail("--param takes key=value")
        stats = rerender_golden(rerender, out, protocol=protocol, params={k: v for k, _, v in pairs}, eval_sets=exclude,
                                command=command)
        typer.echo(f"wrote {stats.trajectories} {protocol} trajectories to {out}")
        for name, r in stats.rendering.items():
            why = ", ".join(f"{n} {k}" for k, n in r.dropped.items()) or "none"
            typer.echo(f"  {name}: {r.rendered} of {r.stored} rendered ({r.searches} searches); not rendered: {why}")
        return
    stats = build_golden(sources, out, eval_sets=exclude, k=k, ground=ground, routing=routing, command=command)
    typer.echo(f"wrote {stats.trajectories} trajectories to {out} ({', '.join(f'{k} {v}' for k, v in stats.by_source.items())})")
    for name, g in stats.grounding.items():
        typer.echo(f"  {name}: {g.hops} hops, gold retrieved {g.retrieved_total} ({g.switched} by another mode), "
                   f"{g.injected} injected, {g.skipped} left out (gold already retrieved)")


@app.command("golden-steps")
def golden_steps_command(
    out: Path = typer.Option(..., "--out", "-o", help="folder for trajectories.jsonl, steps.jsonl and steps_stats.json"),
    sources: list[str] = typer.Option(
        ["wtq-train:200", "musique"], "--source", "-s",
        help="step sources, NAME or NAME:N (N evenly spaced questions after the evaluation sets' are dropped; "
             "repeatable): wtq-train (Table Retriever), musique (Text Retriever per gold hop)"),
    exclude: list[str] = typer.Option(
        ["musique:50", "wtq"], "--exclude",
        help="evaluation sets whose questions are dropped (NAME or NAME:N evenly spaced; repeatable)"),
    k: int = typer.Option(5, "--k", help="documents per sub-question (the r1-router strategy's default); a hop is kept "
                          "when its evidence is in the BM25 top k"),
) -> None:
    """Synthesise grounded step-wise R1-Router trajectories (sub-question, knowledge base, evidence,
    answer) from gold data, as the step rows r1-router-sft / r1-router-step train on, with statistics."""
    import shlex
    import sys

    from routerag.api.training import build_golden_steps

    command = "routerag " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    stats = build_golden_steps(sources, out, eval_sets=exclude, k=k, command=command)
    kinds = ", ".join(f"{kind} {n}" for kind, n in stats.steps_by_kind.items())
    typer.echo(f"wrote {stats.trajectories} trajectories, {stats.steps} step rows ({kinds}) to {out}")
    for name, s in stats.by_source.items():
        why = ", ".join(f"{n} {reason}" for reason, n in s.dropped.items()) or "none"
        typer.echo(f"  {name}: {s.kept} of {s.considered} kept ({s.eval_overlap} of {s.questions} dropped as evaluation "
                   f"overlap first); dropped: {why}{' (reused)' if s.reused else ''}")
