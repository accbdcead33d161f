"""GRPO rollout cost of the real policy: transformers sampling vs llama.cpp sampling (CPU).

The bundled Qwen2.5-Coder-0.5B with the shipped SFT adapter (``lora.init_from``) runs RouteRAG
episodes of ``RouteRAGEnv`` over MuSiQue's cached evaluation index, sampled (temperature 1) by

* ``policy``   - :class:`routerag.train.generation.PolicySampler`: the fp32 training model
  token by token (the default rollout backend; what a GPU run uses without vLLM);
* ``llamacpp`` - :class:`routerag.train.generation.LlamaCppSampler`: the Q4_K_M GGUF + the
  same adapter exported from the training model (``grpo.rollout_backend: llamacpp``),

on the same training questions (MuSiQue, none of the evaluated ones), in one process, one
thread each, and prints a table: seconds per episode, model tokens per second, searches, and the
ratio. Also the export + reload time of one adapter sync.

    python3 benchmarks/bench_rollout.py [--episodes 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=3, help="episodes per sampler (one per question)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from routerag.train.config import RouteRAGTwoStageConfig
    from routerag.train.data import load_sources, load_training_questions
    from routerag.train.env import HFCodec, RouteRAGEnv
    from routerag.train.generation import LlamaCppSampler, PolicySampler
    from routerag.train.policy import gguf_base_path, load_tokenizer_for, load_trainable

    cfg = RouteRAGTwoStageConfig(
        model={"name": "bundled:qwen2.5-coder-0.5b", "dtype": "float32"},
        lora={"enabled": True, "init_from": "policy:routerag-sft-qwen2.5-coder-0.5b", "dropout": 0.0},
        data={"dataset": "musique", "eval_sets": ["2wiki", "musique:50"]},
        sources={"dataset": "musique", "components": ["dense", "bm25", "graph"]},
        env={"max_new_tokens_per_turn": 160, "max_completion_tokens": 1536, "max_observation_tokens": 400},
        grpo={"beta": 0.0},
    )
    t0 = time.perf_counter()
    tokenizer = load_tokenizer_for(cfg.model)
    model = load_trainable(cfg, tokenizer)
    load_s = time.perf_counter() - t0
    questions, _ = load_training_questions(cfg, Path(tempfile.mkdtemp()))
    questions = questions[: args.episodes]
    env = RouteRAGEnv(load_sources(cfg), HFCodec(tokenizer), cfg.env)

    llama = LlamaCppSampler(gguf_base_path(cfg.model.name), tokenizer, Path(tempfile.mkdtemp()), seed=args.seed,
                            n_threads=args.threads)
    t0 = time.perf_counter()
    llama.sync(model, step=0)
    sync_s = time.perf_counter() - t0
    samplers = {"policy": PolicySampler(model, tokenizer, seed=args.seed), "llamacpp": llama}

    rows = {}
    for name, sampler in samplers.items():
        times, tokens, searches = [], [], []
        for q in questions:
            t0 = time.perf_counter()
            r = env.rollout(q, sampler)
            times.append(time.perf_counter() - t0)
            tokens.append(r.model_tokens)
            searches.append(r.cost.retrieval_turns)
        rows[name] = (statistics.mean(times), sum(tokens) / sum(times), statistics.mean(tokens), statistics.mean(searches))

    print(f"\nmodel load (GGUF dequantised + adapter) {load_s:.1f} s; one adapter sync (save + export + llama.cpp load) {sync_s:.1f} s")
    print(f"{args.episodes} episodes per sampler, {args.threads} thread(s)\n")
    print("| sampler | s / episode | model tokens / s | model tokens / episode | searches / episode |")
    print("|---|---:|---:|---:|---:|")
    for name, (sec, tps, tok, srch) in rows.items():
        print(f"| {name} | {sec:.1f} | {tps:.1f} | {tok:.0f} | {srch:.1f} |")
    print(f"\nllama.cpp is {rows['policy'][0] / rows['llamacpp'][0]:.1f}x faster per episode")


if __name__ == "__main__":
    main()
