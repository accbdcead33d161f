"""Does GRPO through the rollout environment learn to route? (CPU, a few minutes)

The toy routing task (``routerag.train.toy``): "Who ...?" questions are answered by the people
source (BM25, mode ``passage``), "Where ...?" questions by the places source (BM25, mode
``graph``); the answer is the top hit's title and the reward is EM. A random 2-layer Qwen2
(hidden 64) over the bundled tokenizer cut to the task's tokens is cold-started (SFT) to write
``<think> [who] </think>\\n<search> [MODE] </search>`` with both modes for every question (chance
routing), then trained with TRL's ``GRPOTrainer`` whose ``rollout_func`` is the real
``RouteRAGEnv``. Writes the metrics, a JSON summary and ``docs/img/train_toy_routing.png``.

    python3 benchmarks/bench_train_toy.py [--grpo-steps 20] [--seed 0] [--out runs/bench-train-toy]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from routerag.train.runfiles import plot_curves, read_metrics
from routerag.train.toy import ToySettings, run_toy_learning


def main() -> None:
    defaults = ToySettings()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/bench-train-toy")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--cold-start", default=defaults.cold_start, choices=["think", "format", "query"])
    parser.add_argument("--vocab", default=defaults.vocab, choices=["task", "full"])
    parser.add_argument("--sft-steps", type=int, default=defaults.sft_steps)
    parser.add_argument("--grpo-steps", type=int, default=defaults.grpo_steps)
    parser.add_argument("--grpo-lr", type=float, default=defaults.grpo_lr)
    parser.add_argument("--num-generations", type=int, default=defaults.num_generations)
    parser.add_argument("--questions-per-step", type=int, default=defaults.questions_per_step)
    parser.add_argument("--loss-type", default=defaults.loss_type, help="TRL loss aggregation: grpo, dapo, dr_grpo, bnpo")
    parser.add_argument("--scale-rewards", default=defaults.scale_rewards, help="group (GRPO), batch, none (Dr. GRPO)")
    parser.add_argument("--temperature", type=float, default=defaults.temperature)
    parser.add_argument("--png", default=str(Path(__file__).resolve().parents[1] / "docs" / "img" / "train_toy_routing.png"))
    args = parser.parse_args()
    settings = ToySettings(
        seed=args.seed, cold_start=args.cold_start, vocab=args.vocab, sft_steps=args.sft_steps, grpo_steps=args.grpo_steps,
        grpo_lr=args.grpo_lr, num_generations=args.num_generations, questions_per_step=args.questions_per_step,
        loss_type=args.loss_type, scale_rewards=args.scale_rewards, temperature=args.temperature,
    )
    t0 = time.perf_counter()
    result = run_toy_learning(args.out, settings)
    records = [r for r in read_metrics(result["metrics"]) if "reward" in r]
    rewards = [r["reward"] for r in records]
    k = min(5, max(len(rewards) // 2, 1))
    result.update(
        rewards=[round(r, 3) for r in rewards],
        first_steps_reward=round(sum(rewards[:k]) / k, 3), last_steps_reward=round(sum(rewards[-k:]) / k, 3),
        seconds=round(time.perf_counter() - t0, 1), load_average=[round(x, 2) for x in os.getloadavg()],
    )
    plot_curves(result["metrics"], args.png,
                title=f"toy routing: GRPO (EM) after a chance-level cold start (G={settings.num_generations}, "
                      f"{settings.questions_per_step} questions/step, seed {settings.seed})")
    Path(args.out, "summary.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
