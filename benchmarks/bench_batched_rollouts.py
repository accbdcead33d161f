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

    python3 benchmarks/bench_batched_rollouts.py                       # random 2-layer Qwen2, real tokenizer
    python3 benchmarks/bench_batched_rollouts.py --model bundled:qwen2.5-coder-0.5b --sizes 1,4,8 --new 16
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny", help="tiny (random 2-layer Qwen2, hidden 64) or a model name routerag loads")
    ap.add_argument("--sizes", default="1,4,16,64", help="batch sizes (number of turns decoded together)")
    ap.add_argument("--new", type=int, default=32, help="new tokens per turn")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads")
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
    for n in [int(s) for s in args.sizes.split(",")]:
        prompts = []
        for i in range(n):
            text = tokenizer.apply_chat_template(
                [{"role": "user", "content": routerag_prompt(f"Question {i}: where is {subjects[i % len(subjects)]}?")}],
                tokenize=False, add_generation_prompt=True)
            prompts.append(list(tokenizer(text, add_special_tokens=False)["input_ids"]))
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


if __name__ == "__main__":
    main()
