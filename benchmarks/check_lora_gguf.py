"""Does the exported llama.cpp LoRA adapter compute what PEFT trained?

For RouteRAG prompts (the rendered first turn of a few training-free questions, and the same with
a partial trajectory), compare next-token distributions of

* ``hf+lora``  transformers on the dequantised GGUF (fp32) + the PEFT adapter (the reference),
* ``hf``       the same without the adapter,
* ``cpp+lora`` llama.cpp on the Q4_K_M GGUF + the exported adapter GGUF,
* ``cpp``      llama.cpp without the adapter.

The adapter is exported correctly when ``cpp+lora`` is as close to ``hf+lora`` as ``cpp`` is to
``hf`` (the quantised-kernel gap) and far closer than ``cpp`` is to ``hf+lora``.

    python benchmarks/check_lora_gguf.py RUN_DIR [--threads 1] [--json out.json]

RUN_DIR holds ``final/`` (the PEFT adapter) and ``adapter.gguf`` (routerag-sft writes both).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

QUESTIONS = [  # HotpotQA-style questions outside every evaluation set used here
    "Which magazine was started first, Arthur's Magazine or First for Women?",
    "What nationality was the director of the film Maximum Overdrive?",
    "Who wrote the novel that the opera Lucia di Lammermoor is based on?",
]
CONTINUATION = ("<think> I need to find the director first. </think>\n<search> [passage] Maximum Overdrive director </search>\n\n"
                "<information>Doc 1(Title: Maximum Overdrive) Maximum Overdrive is a 1986 American science fiction horror "
                "comedy film written and directed by Stephen King.\n</information>\n\n")


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


def compare(ref: np.ndarray, other: np.ndarray, k: int = 10) -> dict[str, float]:
    lp, lq = log_softmax(ref), log_softmax(other)
    p = np.exp(lp)
    top_ref, top_other = np.argsort(-lp)[:k], np.argsort(-lq)[:k]
    return {
        "kl": float((p * (lp - lq)).sum()),
        "top1_agree": float(top_ref[0] == top_other[0]),
        f"top{k}_overlap": len(set(top_ref) & set(top_other)) / k,
        "max_abs_logprob_diff_top10": float(np.abs(lp[top_ref] - lq[top_ref]).max()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--base", default="bundled:qwen2.5-coder-0.5b")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    import torch
    from peft import PeftModel

    from routerag.llm.hf_assets import load_causal_lm, load_tokenizer
    from routerag.llm.llamacpp import LlamaCppModel
    from routerag.llm.resolve import resolve_model_file
    from routerag.strategies.prompts import routerag_prompt

    torch.set_num_threads(args.threads)
    base_path = resolve_model_file(args.base)
    tokenizer = load_tokenizer(args.base)
    prompts = []
    for q in QUESTIONS:
        rendered = tokenizer.apply_chat_template([{"role": "user", "content": routerag_prompt(q)}], tokenize=False,
                                                 add_generation_prompt=True)
        prompts += [rendered, rendered + CONTINUATION]

    t0 = time.perf_counter()
    cpp = LlamaCppModel(base_path, n_ctx=2048, n_threads=args.threads)
    cpp_logits = [cpp.next_token_logits(p) for p in prompts]
    del cpp
    cpp_lora = LlamaCppModel(base_path, n_ctx=2048, n_threads=args.threads, lora_path=args.run_dir / "adapter.gguf")
    cpp_lora_logits = [cpp_lora.next_token_logits(p) for p in prompts]
    del cpp_lora
    t_cpp = time.perf_counter() - t0

    t0 = time.perf_counter()
    model = load_causal_lm(args.base, dtype="float32", device="cpu")
    model.eval()

    def hf_logits(m) -> list[np.ndarray]:
        out = []
        with torch.no_grad():
            for p in prompts:
                ids = torch.tensor([tokenizer(p, add_special_tokens=False)["input_ids"]])
                out.append(m(input_ids=ids).logits[0, -1].float().numpy())
        return out

    hf = hf_logits(model)
    peft_model = PeftModel.from_pretrained(model, str(args.run_dir / "final"))
    hf_lora = hf_logits(peft_model)
    t_hf = time.perf_counter() - t0

    pairs = {
        "cpp+lora vs hf+lora (export check)": (hf_lora, cpp_lora_logits),
        "cpp vs hf+lora (no adapter)": (hf_lora, cpp_logits),
        "cpp vs hf (quantised-kernel gap)": (hf, cpp_logits),
        "hf vs hf+lora (what the adapter changes)": (hf_lora, hf),
    }
    report: dict[str, dict[str, float]] = {}
    for name, (ref, other) in pairs.items():
        rows = [compare(r, o) for r, o in zip(ref, other)]
        report[name] = {key: round(float(np.mean([r[key] for r in rows])), 4) for key in rows[0]}
        print(f"{name:44s} " + "  ".join(f"{k}={v}" for k, v in report[name].items()))
    top = [tokenizer.decode([int(np.argmax(x))]) for x in hf_lora]
    top_cpp = [tokenizer.decode([int(np.argmax(x))]) for x in cpp_lora_logits]
    top_base = [tokenizer.decode([int(np.argmax(x))]) for x in cpp_logits]
    print("top-1 hf+lora :", top)
    print("top-1 cpp+lora:", top_cpp)
    print("top-1 cpp     :", top_base)
    print(f"time: llama.cpp {t_cpp:.1f} s, transformers {t_hf:.1f} s, prompts {len(prompts)}")
    if args.json:
        args.json.write_text(json.dumps({"prompts": len(prompts), "metrics": report, "top1": {"hf+lora": top, "cpp+lora": top_cpp,
                                         "cpp": top_base}}, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
