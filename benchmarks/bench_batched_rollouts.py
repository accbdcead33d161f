"""Batched versus one-at-a-time decoding of rollout turns (the GRPO ``batched`` backend), one run, ratios.

The same N turn requests (RouteRAG prompts of N different training-style questions, greedy, a fixed
number of new tokens, no stop string so that every row decodes the same length) are decoded

* ``sequential``: one by one with :class:`~routerag.train.generation.PolicySampler` (what the
  ``policy`` backend does, its KV cache reset between requests), and
* ``batched``: as one left-padded batch with :class:`~routerag.train.batched.BatchSampler`,

and, for the check, the greedy tokens of both must agree. It prints seconds, generated tokens per
second and the speed-up for each batch size. On a GPU the batch costs about what one sequence costs
(the speed-up grows with N); on a CPU the matrix work grows with the batch, so the gain is what
batching saves in per-step overhead.

With ``--lengths-from ROLLOUTS`` (a GRPO run's ``rollouts.jsonl[.gz]``) a second table decodes
ragged batches: turn k of the episodes of one step, each row limited to the token length that turn
really had in that run, as one batch that keeps every row until the slowest ends (``full``) and as
one whose ended rows leave the batch and the KV cache (``pruned``, the default). It prints the rows
run through the model (``row_steps``), seconds and the speed-up; the tokens must agree.

    python3 benchmarks/bench_batched_rollouts.py                       # random 2-layer Qwen2, real tokenizer
    python3 benchmarks/bench_batched_rollouts.py --model bundled:qwen2.5-coder-0.5b --sizes 1,4,8 --new 16
    python3 benchmarks/bench_batched_rollouts.py --sizes 4 --steps 2 --lengths-from docs/results/grpo-gpu/train/rollouts.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny", help="tiny (random 2-layer Qwen2, hidden 64) or a model name routerag loads")
    ap.add_argument("--sizes", default="1,4,16,64", help="batch sizes (number of turns decoded together)")
    ap.add_argument("--new", type=int, default=32, help="new tokens per turn")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    ap.add_argument("--lengths-from", type=Path, default=None, help="a GRPO run's rollouts.jsonl[.gz]: ragged batches with its turn lengths")
    ap.add_argument("--steps", type=int, default=2, help="with --lengths-from: how many of its steps")
    args = ap.parse_args()

    import torch

    from routerag.llm.hf_assets import load_tokenizer
    from routerag.strategies.prompts import routerag_prompt
    from routerag.train.batched import BatchSampler, TurnRequest
    from routerag.train.generation import PolicySampler

    torch.set_num_threads(args.threads)
    tokenizer = load_tokenizer("bundled:qwen2.5-coder-0.5b")
    if args.model == "tiny":
        from routerag.train.fixtures import tiny_qwen2

        model = tiny_qwen2(len(tokenizer), seed=0)
    else:
        from routerag.llm.hf_assets import load_causal_lm

        model = load_causal_lm(args.model, dtype="float32")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = model.to(device).eval()
    subjects = ["Paris", "the Rhone", "Babycham", "Xawery Zulawski", "the Eiffel Tower", "Lyon", "Berlin", "Kyoto"]
    print(f"model {args.model} on {device}, {args.new} new tokens a turn, {args.threads} CPU threads")
    print(f"{'turns':>6} {'sequential s':>13} {'batched s':>10} {'seq tok/s':>10} {'batch tok/s':>12} {'speed-up':>9} {'same tokens':>12}")

    def prompts_for(n: int) -> list[list[int]]:
        prompts = []
        for i in range(n):
            text = tokenizer.apply_chat_template(
                [{"role": "user", "content": routerag_prompt(f"Question {i}: where is {subjects[i % len(subjects)]}?")}],
                tokenize=False, add_generation_prompt=True)
            prompts.append(list(tokenizer(text, add_special_tokens=False)["input_ids"]))
        return prompts

    for n in [int(s) for s in args.sizes.split(",")]:
        prompts = prompts_for(n)
        one = PolicySampler(model, tokenizer, temperature=0.0)
        t0 = time.perf_counter()
        seq = []
        for p in prompts:
            one.reset()
            seq.append(one(p, [], args.new)[0])
        t_seq = time.perf_counter() - t0
        batch = BatchSampler(model, tokenizer, temperature=0.0)
        t0 = time.perf_counter()
        got = batch([TurnRequest(p, [], args.new) for p in prompts])
        t_batch = time.perf_counter() - t0
        tokens = sum(len(s) for s in seq)
        same = sum(int(g[0] == s) for g, s in zip(got, seq))
        print(f"{n:>6} {t_seq:>13.2f} {t_batch:>10.2f} {tokens / t_seq:>10.1f} {tokens / t_batch:>12.1f} "
              f"{t_seq / t_batch:>8.1f}x {same:>6}/{n:<5}")
    if args.lengths_from is not None:
        ragged(model, tokenizer, prompts_for, turn_lengths(args.lengths_from, tokenizer, args.steps))


def turn_lengths(path: Path, tokenizer: Any, steps: int) -> dict[tuple[int, int], list[int]]:
    """(step, turn index) -> the token length of that turn in each episode of that step."""
    opener = gzip.open if path.suffix == ".gz" else open
    lengths: dict[tuple[int, int], list[int]] = defaultdict(list)
    with opener(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if row["step"] > steps:
                break
            for k, step in enumerate(row["trace"]["steps"]):
                text = step.get("raw_output") or ""
                lengths[(row["step"], k)].append(max(1, len(tokenizer(text, add_special_tokens=False)["input_ids"])))
    return dict(lengths)


def ragged(model: Any, tokenizer: Any, prompts_for: Any, lengths: dict[tuple[int, int], list[int]]) -> None:
    from routerag.train.batched import BatchSampler, TurnRequest

    print("\nragged turns (each row limited to its real length): full batch vs ended rows pruned")
    print(f"{'step':>4} {'turn':>4} {'rows':>5} {'max':>4} {'mean':>6} {'row_steps full':>15} {'pruned':>7} "
          f"{'full s':>7} {'pruned s':>9} {'speed-up':>9} {'same':>5}")
    for (step, k), limits in sorted(lengths.items()):
        prompts = prompts_for(len(limits))
        requests = [TurnRequest(p, [], m) for p, m in zip(prompts, limits)]
        full = BatchSampler(model, tokenizer, temperature=0.0, prune_finished=False)
        pruned = BatchSampler(model, tokenizer, temperature=0.0)
        t0 = time.perf_counter()
        ref = full(requests)
        t_full = time.perf_counter() - t0
        t0 = time.perf_counter()
        got = pruned(requests)
        t_pruned = time.perf_counter() - t0
        same = sum(int(a[0] == b[0]) for a, b in zip(got, ref))
        print(f"{step:>4} {k:>4} {len(limits):>5} {max(limits):>4} {sum(limits) / len(limits):>6.1f} {full.row_steps:>15} "
              f"{pruned.row_steps:>7} {t_full:>7.2f} {t_pruned:>9.2f} {t_full / t_pruned:>8.1f}x {same:>5}")


if __name__ == "__main__":
    main()
