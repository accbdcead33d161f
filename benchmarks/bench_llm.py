"""Prefill and decode speed of a GGUF model through the llama.cpp backend, and the effect of
reusing the KV cache of the previous turn (prefix reuse) on a multi-turn trajectory.

    python3 benchmarks/bench_llm.py                      # bundled 0.5B, 1 and 2 threads
    python3 benchmarks/bench_llm.py --threads 2 --repeat 5 --model /path/to/model.gguf

Prints a markdown table; every number is the median over ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from routerag.llm.base import GenerationParams, Message
from routerag.llm.llamacpp import LlamaCppModel
from routerag.llm.resolve import resolve_model_file

PASSAGE = (
    "Paris is the capital and largest city of France. It is located on the Seine river, in the north of the "
    "country. The city has been a major centre of finance, diplomacy, commerce, fashion and science since the "
    "17th century. "
)


def _question(n_passages: int) -> list[Message]:
    docs = "\n".join(f"Doc {i + 1}: {PASSAGE}" for i in range(n_passages))
    return [
        Message(role="system", content="Answer the question using the documents."),
        Message(role="user", content=f"{docs}\nQuestion: What river runs through Paris?"),
    ]


def bench(model: LlamaCppModel, repeat: int, passages: int) -> dict[str, float]:
    convo = _question(passages)
    prefill_rate, decode_rate, cold_ms, warm_ms, reused, new_tokens, prompt_tokens = [], [], [], [], [], [], []
    for i in range(repeat):
        print(f"  run {i + 1}/{repeat}", file=sys.stderr, flush=True)
        model.reset()
        model.chat(convo, GenerationParams(max_tokens=1))
        s = model.last_stats
        prefill_rate.append(s.prompt_tokens / (s.prefill_ms / 1000.0))
        prompt_tokens.append(s.prompt_tokens)

        model.reset()
        counting = [Message(role="user", content="Count from 1 to 300, separated by commas.")]
        model.chat(counting, GenerationParams(max_tokens=65))
        s = model.last_stats
        decode_rate.append((s.completion_tokens - 1) / (s.decode_ms / 1000.0))

        # a trajectory: turn 1 searches, turn 2 continues with the retrieved information appended
        turn1 = convo + [Message(role="assistant", content="<think>I need the river.</think>\n<search>")]
        turn2 = convo + [
            Message(
                role="assistant",
                content=turn1[-1].content + "river through Paris</search>\n"
                f"<information>{PASSAGE}</information>\n<think>",
            )
        ]
        model.reset()
        model.chat(turn1, GenerationParams(max_tokens=8, stop=["</search>"]), continue_final=True)
        model.chat(turn2, GenerationParams(max_tokens=1), continue_final=True)
        s = model.last_stats
        warm_ms.append(s.prefill_ms)
        reused.append(s.reused_prompt_tokens)
        new_tokens.append(s.prompt_tokens - s.reused_prompt_tokens)
        model.reset()
        model.chat(turn2, GenerationParams(max_tokens=1), continue_final=True)
        cold_ms.append(model.last_stats.prefill_ms)
    med = statistics.median
    return {
        "prompt_tokens": med(prompt_tokens),
        "prefill_tok_s": med(prefill_rate),
        "decode_tok_s": med(decode_rate),
        "turn2_cold_ms": med(cold_ms),
        "turn2_warm_ms": med(warm_ms),
        "turn2_reused": med(reused),
        "turn2_new": med(new_tokens),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="bundled:qwen2.5-coder-0.5b")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--passages", type=int, default=6, help="passages in the prefill prompt (~45 tokens each)")
    args = parser.parse_args()
    path = resolve_model_file(args.model)
    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        start = time.perf_counter()
        model = LlamaCppModel(path, n_ctx=2048, n_threads=threads)
        load_s = time.perf_counter() - start
        print(f"threads={threads}: loaded in {load_s:.2f} s", file=sys.stderr, flush=True)
        rows.append((threads, load_s, bench(model, args.repeat, args.passages)))
        del model
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"model: {path.name}; median of {args.repeat}; load average at the end {load:.1f} on {os.cpu_count()} cores\n"
    )
    print(
        "| threads | load s | prompt tok | prefill tok/s | decode tok/s | turn 2 new/reused tok | turn 2 prefill cold ms | turn 2 prefill warm ms |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for threads, load_s, r in rows:
        print(
            f"| {threads} | {load_s:.2f} | {r['prompt_tokens']:.0f} | {r['prefill_tok_s']:.0f} | {r['decode_tok_s']:.1f} | "
            f"{r['turn2_new']:.0f}/{r['turn2_reused']:.0f} | {r['turn2_cold_ms']:.0f} | {r['turn2_warm_ms']:.0f} |"
        )


if __name__ == "__main__":
    main()
