"""``routerag train RECIPE`` (GRPO / SFT recipes over TRL) and ``routerag export-verl`` (training data
for verl / Search-R1). Heavy imports stay inside the command bodies."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import typer

from routerag.cli.app import app


def _fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


@app.command("train")
def train_command(
    recipe: str = typer.Argument(..., help="routerag-two-stage | graphrag-r1 | r1-router-step | routerag-sft"),
    config: Path = typer.Option(None, "--config", help="a YAML file of TrainConfig (see configs/train/)"),
    overrides: list[str] = typer.Option(None, "--set", help="override a setting: key.path=value (repeatable), e.g. grpo.max_steps=10"),
    out: Path = typer.Option(None, "--out", "-o", help="run directory (default: the config's output_dir); an existing one is resumed"),
    dry_run: bool = typer.Option(False, "--dry-run", help="validate and print the resolved configuration, train nothing"),
) -> None:
    """Train a routing policy with one of the seed papers' recipes."""
    import yaml

    from routerag.config import ConfigError, load_config
    from routerag.registry import UnknownNameError
    from routerag.train.config import TrainConfig
    from routerag.train.recipes import RECIPES, train

    if recipe not in RECIPES:
        _fail(f"unknown recipe {recipe!r}; valid: {', '.join(RECIPES.names())}")
    items = [*(overrides or []), f"recipe={recipe}"]
    if out is not None:
        items.append(f"output_dir={out}")
    try:
        cfg = load_config(TrainConfig, config, items)
    except ConfigError as exc:
        _fail(str(exc), 2)
    if dry_run:
        typer.echo(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
        return
    try:
        summary = train(cfg)
    except (ValueError, FileNotFoundError, UnknownNameError) as exc:
        _fail(str(exc))
    typer.echo(f"trained {summary.steps} steps ({', '.join(summary.phases)}); run in {summary.output_dir}")
    typer.echo(f"metrics: {summary.metrics_path}")
    if summary.curves_path:
        typer.echo(f"curves:  {summary.curves_path}")


@app.command("export-verl")
def export_verl_command(
    dataset: str = typer.Option(..., "--dataset", "-d", help="routerag dataset name or file:<path>"),
    out: Path = typer.Option(..., "--out", "-o", help="parquet file to write"),
    split: str = typer.Option("train", help="split name recorded in extra_info"),
    limit: int = typer.Option(None, "--limit", "-n", help="evenly spaced questions to keep"),
    exclude: list[str] = typer.Option(["2wiki"], "--exclude", help="evaluation datasets whose questions are dropped (repeatable)"),
) -> None:
    """Write training questions in the verl / Search-R1 parquet schema (reward: routerag.train.export_verl.compute_score)."""
    from routerag.corpus.datasets import load_dataset
    from routerag.train.export_verl import export_parquet
    from routerag.train.golden import check_overlap

    questions = load_dataset(dataset, n_questions=limit).questions
    dropped = 0
    if exclude and split == "train":
        bad = set(check_overlap(questions, exclude).overlapping)
        dropped = len(bad)
        questions = [q for q in questions if q.qid not in bad]
    path = export_parquet(questions, out, dataset, split=split)
    typer.echo(f"wrote {len(questions)} rows to {path} ({dropped} dropped as overlapping {', '.join(exclude)})")


@app.command("export-lora-gguf")
def export_lora_gguf_command(
    adapter: Path = typer.Argument(..., help="a saved PEFT LoRA adapter directory (adapter_config.json + adapter_model.safetensors)"),
    out: Path = typer.Option(..., "--out", "-o", help="adapter GGUF to write"),
    base: str = typer.Option("bundled:qwen2.5-coder-0.5b", "--base", help="the base model's GGUF (a path or bundled: name) the adapter was trained on"),
    dtype: str = typer.Option("f16", "--dtype", help="f16 | f32"),
) -> None:
    """Export a PEFT LoRA adapter as a llama.cpp LoRA adapter GGUF (for --set model.lora_path=...)."""
    from routerag.llm.base import ModelError
    from routerag.llm.resolve import resolve_model_file
    from routerag.train.export_gguf import LoraExportError, export_lora_gguf

    try:
        info = export_lora_gguf(adapter, resolve_model_file(base), out, dtype=dtype)
    except (LoraExportError, ModelError) as exc:
        _fail(str(exc))
    typer.echo(f"wrote {info.path}: {info.tensors} tensors, rank {info.rank}, alpha {info.alpha:g}, {info.architecture}")
