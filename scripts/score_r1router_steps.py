"""Score a policy on the released R1-Router steps of one side of the fixed split, every step kind
(decompose-and-route, intermediate answer, final answer), with the Step-GRPO reward's parts.

    python3 scripts/score_r1router_steps.py --side heldout --out runs/steps/untrained.jsonl
    python3 scripts/score_r1router_steps.py --side heldout --kinds ans,final \\
        --lora runs/train/r1-router-sft-cpu/adapter.gguf --out runs/steps/sft.jsonl

llama.cpp over the bundled 0.5B (one thread by default), greedy; resumable (an existing --out is
continued). Prints the per-kind summary (format errors %, routing / similarity / F1-recall /
accuracy %) and writes it beside --out (``<out>.summary.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", choices=["train", "heldout"], default="heldout")
    parser.add_argument("--kinds", default="ret,ans,final", help="step kinds to score (comma-separated)")
    parser.add_argument("--max-per-kind", type=int, default=None, help="evenly spaced steps of each kind (default: all)")
    parser.add_argument("--model", default="bundled:qwen2.5-coder-0.5b")
    parser.add_argument("--lora", default=None, help="llama.cpp LoRA adapter GGUF (model.lora_path)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--similarity", choices=["embedding", "token_f1"], default="embedding")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    from routerag.corpus.sampling import evenly_spaced
    from routerag.llm.base import GenerationParams
    from routerag.llm.config import ModelConfig
    from routerag.llm.factory import build_model
    from routerag.train.golden.r1router import r1_router_step_rows
    from routerag.train.rewards import R1RouterStepRewardParams
    from routerag.train.step_score import score_steps, summarize_steps

    steps = r1_router_step_rows(side=args.side)
    rows = [r for kind in args.kinds.split(",")
            for r in evenly_spaced([r for r in steps if json.loads(r["step"])["step_type"] == kind], args.max_per_kind)]
    model = build_model(ModelConfig(model=args.model, lora_path=args.lora, n_threads=args.threads, cache=False))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    records = score_steps(model, rows, args.out, params=R1RouterStepRewardParams(similarity=args.similarity),
                          generation=GenerationParams(max_tokens=args.max_tokens, temperature=0.0),
                          progress=lambda i, n: print(f"{i}/{n}", file=sys.stderr, flush=True))
    summary = {"side": args.side, "model": args.model, "lora": args.lora, "max_per_kind": args.max_per_kind,
               "max_tokens": args.max_tokens, "by_step_type": summarize_steps(records)}
    args.out.with_suffix(".summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
