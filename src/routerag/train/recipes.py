"""Training recipes over TRL: GRPO through the rollout environment, SFT cold starts, LoRA.

=======================  ==========================================================================
``routerag-two-stage``   RouteRAG: GRPO (G = 5) with EM through ``switch_step``, then accuracy–efficiency
``graphrag-r1``          GraphRAG-R1: SFT cold start on golden trajectories, then GRPO with
                         format + PRA, then format + CAF
``r1-router-step``       R1-Router Step-GRPO: GRPO over per-step prompts of golden trajectories with
                         the format-gated step reward
``r1-router-sft``        R1-Router cold start: SFT on the released steps' prompts and gold outputs (train
                         side of the fixed split), LoRA exported as a llama.cpp adapter GGUF
                         (both R1-Router recipes: plus the steps of ``golden_steps``' synthesised sets)
``routerag-sft``         SFT cold start only (RouteRAG protocol, real-retrieval observations), LoRA
                         exported as a llama.cpp adapter GGUF for the fast backend
``routerag-rft``         rejection-sampling rounds (expert iteration): llama.cpp samples G episodes per
                         question, the best correct one is kept, a fresh adapter is fine-tuned on
                         kept + golden with the SFT fast path
=======================  ==========================================================================

The GRPO recipes hand TRL a ``rollout_func`` that runs :class:`~routerag.train.env.RouteRAGEnv`
once per prompt entry (TRL repeats each prompt ``num_generations`` times before calling it) and
returns ``env_mask`` so that observation tokens get no loss. Each reward of the schedule is one TRL
reward function (TRL logs ``rewards/<name>/mean``); the active stage is read from
``trainer_state.global_step``. A run directory holds ``config.resolved.yaml``, ``metrics.jsonl``
(one record per logging step: reward and components, EM, retrieval turns and cost, completion
length, KL, loss), ``training_curves.png``, ``checkpoint-*`` and the final model; an existing
run directory is resumed from its last checkpoint.

The pieces live in small modules: :mod:`~routerag.train.policy` (model, tokenizer, restored
adapter), :mod:`~routerag.train.data` (questions, sources, schedules), :mod:`~routerag.train.grpo`
(TRL glue), :mod:`~routerag.train.sft` (cold starts), :mod:`~routerag.train.runfiles` (metrics,
curves, checkpoints), :mod:`~routerag.train.adapters` (LoRA). TRL, transformers, peft and torch
are imported inside the functions.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from routerag.config import atomic_write_text
from routerag.corpus.schema import Question
from routerag.registry import Registry, callables_taking
from routerag.sources.sourceset import SourceSet
from routerag.trace import Trace
from routerag.train.config import (
    GraphRAGR1Config,
    R1RouterSFTConfig,
    R1RouterStepConfig,
    RouteRAGRFTConfig,
    RouteRAGSFTConfig,
    RouteRAGTwoStageConfig,
    TrainConfig,
)
from routerag.train.data import default_schedule, load_sources, load_training_questions
from routerag.train.env import HFCodec, RouteRAGEnv
from routerag.train.export_gguf import export_adapter_gguf
from routerag.train.grpo import grpo_trainer, make_reward_funcs, run_grpo
from routerag.train.policy import load_tokenizer_for, load_trainable
from routerag.train.runfiles import CURVES_FILE, METRICS_FILE, last_checkpoint, plot_curves, plot_loss, start_run
from routerag.train.sft import chat_sft_rows, fit_rows, read_token_rows, run_sft, sft_rows, sft_trajectories

if TYPE_CHECKING:
    from routerag.train.golden_steps import TrainingSteps

Recipe = Callable[[Any], "TrainRunSummary"]  # each takes its own recipe class (train.config.RECIPE_CONFIGS)
RECIPES: Registry[Recipe] = Registry("recipe", callables_taking("config"))


class TrainRunSummary(BaseModel):
    recipe: str
    output_dir: str
    steps: int
    metrics_path: str
    curves_path: str | None
    final_model: str | None
    phases: list[str]


def _prepare(cfg: TrainConfig) -> tuple[Path, Any, Any, list[Question], SourceSet | None]:
    out = start_run(cfg)
    tokenizer = load_tokenizer_for(cfg.model)
    model = load_trainable(cfg, tokenizer)
    toy_dir = out / "toy_sources"
    questions, sources = load_training_questions(cfg, toy_dir)
    return out, tokenizer, model, questions, sources


def _finish(cfg: TrainConfig, trainer: Any, out: Path, phases: list[str]) -> TrainRunSummary:
    final = out / "final"
    trainer.save_model(str(final))
    exported = export_adapter_gguf(cfg, final, out)
    if exported is not None:
        atomic_write_text(out / "adapter_gguf.json", json.dumps(exported, indent=2))
    curves = plot_curves(out / "grpo" / METRICS_FILE if (out / "grpo").is_dir() else out / METRICS_FILE,
                         out / CURVES_FILE, title=cfg.recipe)
    metrics = out / "grpo" / METRICS_FILE if (out / "grpo").is_dir() else out / METRICS_FILE
    return TrainRunSummary(recipe=cfg.recipe, output_dir=str(out), steps=int(trainer.state.global_step),
                      metrics_path=str(metrics), curves_path=str(curves) if curves else None,
                      final_model=str(final), phases=phases)


def _env_for(cfg: TrainConfig, tokenizer: Any, sources: SourceSet | None) -> RouteRAGEnv:
    return RouteRAGEnv(sources if sources is not None else load_sources(cfg), HFCodec(tokenizer, chat_template=cfg.model.chat_template), cfg.env)


@RECIPES.register("routerag-two-stage")
def routerag_two_stage(cfg: RouteRAGTwoStageConfig) -> TrainRunSummary:
    """RouteRAG: GRPO (G = 5), EM until ``switch_step``, then accuracy–efficiency."""
    out, tokenizer, model, questions, sources = _prepare(cfg)
    env = _env_for(cfg, tokenizer, sources)
    trainer = run_grpo(cfg, model, tokenizer, env, questions, default_schedule(cfg), out / "grpo")
    return _finish(cfg, trainer, out, ["grpo"])


@RECIPES.register("graphrag-r1")
def graphrag_r1(cfg: GraphRAGR1Config) -> TrainRunSummary:
    """GraphRAG-R1: SFT cold start on golden trajectories rendered in its protocol
    (:mod:`~routerag.train.graphrag_r1_sft`), then format+PRA, then format+CAF from that adapter,
    every rollout in the GraphRAG-R1 episode (``env.strategy: graphrag-r1``: R1-Searcher's tags,
    facts and passages between the documents tags), the one its strategy is evaluated in."""
    from routerag.train.graphrag_r1_sft import SFT_SUMMARY_FILE, graphrag_r1_cold_start

    out = start_run(cfg)
    tokenizer = load_tokenizer_for(cfg.model)
    questions, sources = load_training_questions(cfg, out / "toy_sources")
    env = _env_for(cfg, tokenizer, sources)
    phases, grpo_cfg = [], cfg
    if cfg.sft.enabled:
        adapter = graphrag_r1_cold_start(cfg, tokenizer, env, out / "sft")
        if cfg.lora.enabled:  # GRPO continues the stage-1 adapter
            grpo_cfg = cfg.model_copy(update={"lora": cfg.lora.model_copy(update={"init_from": str(adapter)})})
        phases.append("sft")
        if cfg.stop_after_sft:
            summary = out / "sft" / SFT_SUMMARY_FILE
            return TrainRunSummary(recipe=cfg.recipe, output_dir=str(out), steps=json.loads(summary.read_text())["steps"],
                                   metrics_path=str(out / "sft" / METRICS_FILE), curves_path=None, final_model=str(adapter),
                                   phases=phases)
    model = load_trainable(grpo_cfg, tokenizer)
    trainer = run_grpo(grpo_cfg, model, tokenizer, env, questions, default_schedule(cfg), out / "grpo")
    phases.append("grpo")
    return _finish(cfg, trainer, out, phases)


@RECIPES.register("r1-router-step")
def r1_router_step(cfg: R1RouterStepConfig) -> TrainRunSummary:
    """R1-Router Step-GRPO over the per-step prompts of the released golden trajectories."""
    out = start_run(cfg)
    tokenizer = load_tokenizer_for(cfg.model)
    model = load_trainable(cfg, tokenizer)
    rows = r1_router_step_prompts(cfg)
    schedule = default_schedule(cfg)
    funcs = make_reward_funcs(schedule, trace_key="trace")
    trainer = grpo_trainer(cfg, model, tokenizer, rows, [_step_adapter(f) for f in funcs], out / "grpo")
    trainer.train(resume_from_checkpoint=last_checkpoint(out / "grpo") if cfg.resume else None)
    return _finish(cfg, trainer, out, ["grpo"])


def _r1_router_steps(cfg: R1RouterStepConfig | R1RouterSFTConfig) -> TrainingSteps:
    """The released steps of ``cfg.trajectories``, then those of the synthesised step sets of
    ``cfg.golden_steps`` (checked against ``data.eval_sets``)."""
    from routerag.train.golden_steps import r1_router_training_steps

    return r1_router_training_steps(None if cfg.trajectories == "all" else cfg.trajectories, cfg.golden_steps,
                                    cfg.data.eval_sets)


def r1_router_step_prompts(cfg: R1RouterStepConfig) -> list[dict[str, Any]]:
    """The Step-GRPO rows of a run: the released steps of ``cfg.trajectories`` and the synthesised
    ones of ``cfg.golden_steps`` whose kind is in ``cfg.step_types``, ``data.n_questions`` of them
    evenly spaced (all when None)."""
    from routerag.corpus.sampling import evenly_spaced

    rows = [{k: v for k, v in r.items() if k != "trajectory"}
            for r in _r1_router_steps(cfg).rows if json.loads(r["step"])["step_type"] in cfg.step_types]
    rows = evenly_spaced(rows, cfg.data.n_questions)
    if not rows:
        raise ValueError(f"no R1-Router steps of kinds {cfg.step_types} on the {cfg.trajectories} side")
    return rows


def _step_adapter(fn: Callable[..., list[float]]) -> Callable[..., list[float]]:
    """Turns single-turn TRL completions into one-step traces for the step reward."""

    def reward(prompts: list, completions: list, **kw: Any) -> list[float]:
        from routerag.trace import Segment

        traces = []
        for p, c in zip(prompts, completions):
            text = c if isinstance(c, str) else c[-1]["content"]
            prompt = p if isinstance(p, str) else "\n\n".join(m["content"] for m in p)
            traces.append(Trace(question=prompt, strategy="r1-router-step",
                                segments=[Segment(kind="prompt", text=prompt), Segment(kind="model", text=text)]))
        extras = [json.loads(e) if isinstance(e, str) else e for e in kw.pop("step", [{}] * len(prompts))]
        kw["trace"] = traces
        kw["extra"] = extras
        return fn(prompts, completions, **kw)

    reward.__name__ = fn.__name__
    return reward


@RECIPES.register("r1-router-sft")
def r1_router_sft(cfg: R1RouterSFTConfig) -> TrainRunSummary:
    """SFT cold start of an R1-Router step policy on the released steps of the training
    trajectories and the synthesised ones of ``golden_steps`` (prompt masked), exported like
    ``routerag-sft``'s adapter."""
    out = start_run(cfg)
    tokenizer = load_tokenizer_for(cfg.model)
    token_rows, notes = r1_router_sft_rows(cfg, HFCodec(tokenizer, chat_template=cfg.model.chat_template))
    return _sft_and_export(cfg, tokenizer, token_rows, out, notes)


def r1_router_sft_rows(cfg: R1RouterSFTConfig, codec: HFCodec) -> tuple[list[dict[str, list[int]]], dict[str, Any]]:
    """The token rows of an ``r1-router-sft`` run and the notes of ``sft_summary.json``: each step
    of :func:`_r1_router_steps` whose kind is in ``step_types``, its prompt masked and its gold
    output (:func:`~routerag.train.golden.r1router.r1_router_gold_completion`) labelled; rows over
    ``sft.max_length`` dropped (``drop_longer``) or cut; ``max_per_type`` then ``sft.max_examples``
    of them evenly spaced. The notes count the rows by step kind, in all and per origin (the
    released trajectories, each step set), and list the trajectories used."""
    from routerag.corpus.sampling import evenly_spaced
    from routerag.train.golden.r1router import r1_router_gold_completion, trajectory_order

    training = _r1_router_steps(cfg)
    steps = [(r, json.loads(r["step"])) for r in training.rows]
    steps = [(r, extra) for r, extra in steps if extra["step_type"] in cfg.step_types]
    rows = chat_sft_rows([(r["prompt"], r1_router_gold_completion(extra)) for r, extra in steps], codec)
    fits = [not cfg.sft.drop_longer or len(row["input_ids"]) <= cfg.sft.max_length for row in rows]
    fitted = [(row, extra, step["trajectory"]) for row, (step, extra), fit in zip(rows, steps, fits) if fit]
    kept: list[tuple[dict[str, list[int]], dict[str, Any], str]] = []
    for kind in cfg.step_types:
        kept += evenly_spaced([item for item in fitted if item[1]["step_type"] == kind], cfg.max_per_type.get(kind))
    kept = evenly_spaced(kept, cfg.sft.max_examples)
    token_rows = [{k: v[: cfg.sft.max_length] for k, v in row.items()} for row, _, _ in kept]
    if not token_rows:
        raise ValueError("no SFT rows left (all steps longer than sft.max_length?)")
    counts = {kind: sum(extra["step_type"] == kind for _, extra, _ in kept) for kind in cfg.step_types}
    notes: dict[str, Any] = {"by_step_type": counts, "dropped_longer": len(rows) - len(fitted), "trajectories": cfg.trajectories}
    if training.note:  # with step sets: where the rows come from
        notes |= {"by_origin": training.by_origin([(t, extra["step_type"]) for _, extra, t in kept]),
                  "routes_by_origin": training.by_origin([(t, _route(extra)) for _, extra, t in kept
                                                          if extra["step_type"] == "ret"]),
                  "dropped_longer_by_origin": training.by_origin([(step["trajectory"], extra["step_type"])
                                                                  for (step, extra), fit in zip(steps, fits) if not fit]),
                  **training.note}
    return token_rows, {**notes, "trajectory_ids": sorted({t for _, _, t in kept}, key=trajectory_order)}


def _route(extra: dict[str, Any]) -> str:
    """A decompose step's gold knowledge base, lower case (``none``: the stop step)."""
    query, retriever = str(extra["gold_query"]).strip().lower(), str(extra["gold_retriever"]).strip().lower()
    return "none" if retriever == "none" or query in {"", "none"} else retriever


@RECIPES.register("routerag-sft")
def routerag_sft(cfg: RouteRAGSFTConfig) -> TrainRunSummary:
    """SFT cold start of a RouteRAG policy on golden trajectories (prompt and observations
    masked), LoRA adapter saved with PEFT and, for a GGUF base model, exported as a llama.cpp
    adapter GGUF (``adapter.gguf``) for ``model.lora_path``."""
    out = start_run(cfg)
    tokenizer = load_tokenizer_for(cfg.model)
    codec = HFCodec(tokenizer, chat_template=cfg.model.chat_template)
    trajectories = sft_trajectories(cfg, out)
    token_rows = [row for path in cfg.sft.rows_files for row in read_token_rows(path)]
    rows, dropped = fit_rows(sft_rows(trajectories, codec, 10**9, cfg.sft.max_observation_tokens) + token_rows,
                             cfg.sft.max_length, cfg.sft.drop_longer)
    rows = [{k: v[: cfg.sft.max_length] for k, v in r.items()} for r in rows]
    if not rows:
        raise ValueError("no SFT rows left (all trajectories longer than sft.max_length?)")
    return _sft_and_export(cfg, tokenizer, rows, out, {"token_rows": len(token_rows), "dropped_longer": dropped})


def _sft_and_export(cfg: R1RouterSFTConfig | RouteRAGSFTConfig, tokenizer: Any, rows: list[dict[str, list[int]]],
                    out: Path, notes: dict[str, Any]) -> TrainRunSummary:
    """Train the SFT rows (resumed from the last checkpoint), save the adapter, export it as a
    llama.cpp adapter GGUF, write ``sft_summary.json`` (``notes`` + counts and wall time)."""
    import time

    model = load_trainable(cfg, tokenizer)
    t0 = time.perf_counter()
    trainer = run_sft(cfg, model, tokenizer, rows, out / "sft")
    wall = time.perf_counter() - t0
    final = out / "final"
    trainer.save_model(str(final))
    metrics = out / "sft" / METRICS_FILE
    curves = plot_loss(metrics, out / CURVES_FILE, title=f"{cfg.recipe}: {len(rows)} rows")
    summary: dict[str, Any] = {"rows": len(rows), **notes, "train_wall_s": round(wall, 1),
                               "steps": int(trainer.state.global_step),
                               "tokens": sum(len(r["input_ids"]) for r in rows),
                               "loss_tokens": sum(sum(x != -100 for x in r["labels"]) for r in rows)}
    exported = export_adapter_gguf(cfg, final, out)
    if exported is not None:
        summary["adapter_gguf"] = exported
    atomic_write_text(out / "sft_summary.json", json.dumps(summary, indent=2))
    return TrainRunSummary(recipe=cfg.recipe, output_dir=str(out), steps=int(trainer.state.global_step),
                      metrics_path=str(metrics), curves_path=str(curves) if curves else None,
                      final_model=str(final), phases=["sft"])


@RECIPES.register("routerag-rft")
def routerag_rft(cfg: RouteRAGRFTConfig) -> TrainRunSummary:
    """Rejection-sampling fine-tuning (expert iteration) with llama.cpp rollouts and the SFT fast
    path, round by round (``train/rft.py``)."""
    from routerag.train.rft import RFT_CURVES_FILE, run_rft

    out = start_run(cfg)
    records = run_rft(cfg, out)
    last = max((int(r["round"]) for r in records), default=0)
    curves = out / RFT_CURVES_FILE
    final = out / f"round-{last}" / "final"
    return TrainRunSummary(recipe=cfg.recipe, output_dir=str(out), steps=last, metrics_path=str(out / METRICS_FILE),
                      curves_path=str(curves) if curves.is_file() else None,
                      final_model=str(final) if final.is_dir() else None, phases=["rft"])


def train(cfg: TrainConfig) -> TrainRunSummary:
    """Run the configured recipe."""
    return RECIPES.get(cfg.recipe)(cfg)
