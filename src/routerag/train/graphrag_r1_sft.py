"""GraphRAG-R1's stage 1: an SFT cold start on golden trajectories rendered in its own protocol.

The golden trajectories (a stored set, or built from ``sft.sources``) are re-rendered by
running the ``graphrag-r1`` episode of the run's environment with their turns as the policy
(:class:`~routerag.train.golden.EpisodeReplay`): the same questions and queries, each observation
what the episode shows for the query (facts and passages of its evidence mix, over the run's
sources), cut to ``env.max_observation_tokens`` as rollouts are. The adapter is saved under
``sft/final`` and, for a GGUF base model, exported as ``sft/adapter.gguf``; a run directory whose
``sft/final`` exists skips the phase (resume), and an interrupted phase resumes from its last
checkpoint. With ``sft.dev_examples``, that many evenly spaced trajectories are held out as a
dev slice; its loss before, during and after training is written to ``dev_loss.json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from routerag.config import atomic_write_text
from routerag.corpus.sampling import evenly_spaced_indices
from routerag.train.config import GraphRAGR1Config
from routerag.train.env import RolloutEnv
from routerag.train.export_gguf import export_adapter_gguf
from routerag.train.policy import load_trainable
from routerag.train.runfiles import CURVES_FILE, METRICS_FILE, plot_loss, read_metrics
from routerag.train.sft import fit_rows, run_sft, sft_rows, sft_trajectories

SFT_SUMMARY_FILE = "sft_summary.json"
DEV_LOSS_FILE = "dev_loss.json"


def graphrag_r1_cold_start(cfg: GraphRAGR1Config, tokenizer: Any, env: RolloutEnv, out_dir: Path) -> Path:
    """Train (or find, when done) the stage-1 adapter; returns its PEFT directory."""
    final = out_dir / "final"
    if (final / "adapter_config.json").is_file():
        return final
    from routerag.train.golden import EpisodeReplay

    out_dir.mkdir(parents=True, exist_ok=True)
    replay = EpisodeReplay(env.sources, env.config.strategy, env.params)
    trajectories = sft_trajectories(cfg, out_dir, replay=replay)
    rows, dropped = fit_rows(sft_rows(trajectories, env.codec, 10**9, env.config.max_observation_tokens),  # type: ignore[arg-type]
                             cfg.sft.max_length, cfg.sft.drop_longer)
    rows = [{k: v[: cfg.sft.max_length] for k, v in r.items()} for r in rows]
    held = set(evenly_spaced_indices(len(rows), cfg.sft.dev_examples)) if cfg.sft.dev_examples else set()
    dev = [r for i, r in enumerate(rows) if i in held]
    rows = [r for i, r in enumerate(rows) if i not in held]
    if not rows:
        raise ValueError("no SFT rows left (all trajectories longer than sft.max_length, or all held out as sft.dev_examples?)")
    model = load_trainable(cfg, tokenizer)
    t0 = time.perf_counter()
    trainer = run_sft(cfg, model, tokenizer, rows, out_dir, dev_rows=dev, dev_eval_steps=cfg.sft.dev_eval_steps)
    wall = time.perf_counter() - t0
    if getattr(trainer, "frozen_prefix", None) is not None:
        trainer.frozen_prefix.remove()
    trainer.save_model(str(final))
    plot_loss(out_dir / METRICS_FILE, out_dir / CURVES_FILE, title=f"{cfg.recipe} stage 1: {len(rows)} trajectories")
    summary: dict[str, Any] = {
        "rows": len(rows), "dropped_longer": dropped, "train_wall_s": round(wall, 1), "steps": int(trainer.state.global_step),
        "tokens": sum(len(r["input_ids"]) for r in rows),
        "loss_tokens": sum(sum(x != -100 for x in r["labels"]) for r in rows),
        "learning_rate": cfg.sft.learning_rate, "epochs": cfg.sft.epochs,
    }
    if dev:
        curve = [{"step": r["step"], "loss": r["eval_loss"]} for r in read_metrics(out_dir / METRICS_FILE) if "eval_loss" in r]
        summary["dev_rows"] = len(dev)
        summary["dev_loss"] = {"untrained": curve[0]["loss"] if curve else None, "final": curve[-1]["loss"] if curve else None}
        atomic_write_text(out_dir / DEV_LOSS_FILE, json.dumps({"rows": len(dev), "curve": curve}, indent=2))
    exported = export_adapter_gguf(cfg, final, out_dir)
    if exported is not None:
        summary["adapter_gguf"] = exported
    atomic_write_text(out_dir / SFT_SUMMARY_FILE, json.dumps(summary, indent=2))
    return final
