"""Does GRPO through the rollout environment learn to route? (CPU, a few minutes)

A random 2-layer Qwen2 (hidden 64, the bundled tokenizer) is cold-started to write
``passage] </search>`` or ``graph] </search>`` after ``<search> [`` with equal probability for
every question, then trained with GRPO (EM reward) on the toy routing task: "Who ...?"
questions are answered by the people source (mode ``passage``), "Where ...?" questions by the
places source (mode ``graph``). Writes the metrics and ``docs/img/train_toy_routing.png``.

    python3 benchmarks/bench_train_toy.py [--grpo-steps 30] [--out runs/bench-train-toy]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from routerag.train.recipes import plot_curves, read_metrics
from routerag.train.toy import run_toy_learning


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/bench-train-toy")
    parser.add_argument("--sft-steps", type=int, default=100)
    parser.add_argument("--grpo-steps", type=int, default=30)
    parser.add_argument("--grpo-lr", type=float, default=3e-3)
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32, help="completions per step (questions per step x G)")
    parser.add_argument("--loss-type", default="grpo", help="TRL loss aggregation: grpo, dapo, dr_grpo, bnpo")
    parser.add_argument("--scale-rewards", default="group", help="group (GRPO), batch, none (Dr. GRPO)")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--png", default=str(Path(__file__).resolve().parents[1] / "docs" / "img" / "train_toy_routing.png"))
    args = parser.parse_args()
    t0 = time.perf_counter()
    result = run_toy_learning(args.out, sft_steps=args.sft_steps, grpo_steps=args.grpo_steps, grpo_lr=args.grpo_lr,
                              num_generations=args.num_generations, batch=args.batch, loss_type=args.loss_type,
                              scale_rewards=args.scale_rewards, temperature=args.temperature)
    rewards = [r["reward"] for r in read_metrics(result["metrics"]) if "reward" in r]
    k = max(len(rewards) // 5, 1)
    result.update(first_steps_reward=sum(rewards[:k]) / k, last_steps_reward=sum(rewards[-k:]) / k,
                  seconds=round(time.perf_counter() - t0, 1))
    plot_curves(result["metrics"], args.png, title="toy routing: GRPO (EM) after a chance-level cold start")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
