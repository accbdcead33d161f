"""Two llama.cpp bindings side by side on the same prompts: llama-cpp-python (compiled by
scripts/install.sh, run through routerag's ``LlamaCppModel``) and xllamacpp (a prebuilt wheel, run
through its in-process ``Server.handle_completions``).

    python3 benchmarks/bench_llama_bindings.py --xl-python /tmp/xl/bin/python
    python3 benchmarks/bench_llama_bindings.py --xl-python /tmp/xl/bin/python --rounds 4 --threads 1 --json out.json
    python3 benchmarks/bench_llama_bindings.py --table-from out.json   # the table of a saved (or cut short) run

Each binding runs in its own process (xllamacpp usually lives in another virtualenv: ``--xl-python``
is that interpreter; it needs nothing but ``xllamacpp``). The rounds alternate which binding goes
first, and the table gives each measure per binding (median over rounds) and the ratio
xllamacpp / llama-cpp-python within each round (median, min-max): on a shared machine only the
ratios carry over. Measured, all as wall time from Python around one call:

* load: the base model with the shipped 0.5B policy adapter (a LoRA GGUF applied at load), which
  is also what a GRPO step does to re-apply a new adapter (``LlamaCppSampler.load``);
* prefill tok/s: a cold prompt (~350 tokens, six passages) with one generated token;
* decode tok/s: 64 greedy tokens after a cached prompt;
* turn 2 warm / cold: a RouteRAG trajectory's second turn with the first turn's KV cache, and
  after a reset;

and, in the first round only (greedy, so the same every round), the capability checks: the same
greedy text through both bindings with the adapter (and a different text without it, so the adapter
is known to act), stop strings (which one ended the text), token counts, a GBNF grammar, and an
invalid grammar (an error, not a crash).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PASSAGE = (
    "Paris is the capital and largest city of France. It is located on the Seine river, in the north of the "
    "country. The city has been a major centre of finance, diplomacy, commerce, fashion and science since the "
    "17th century. "
)
QUESTIONS = [
    "Who was born first, Ada Lovelace or Charles Babbage?",
    "What river runs through the capital of France?",
    "Which country is the director of the film Amelie from?",
]
STOPS = ["</search>", "</answer>"]
GRAMMAR = 'root ::= "<answer>" [a-zA-Z ]{1,30} "</answer>"'
BAD_GRAMMAR = "root ::= nothing-here"


# ------------------------------------------------------------------ the job (built by the parent)


def build_job(model_path: Path, adapter: Path, threads: int) -> dict[str, Any]:
    """Rendered prompts (routerag's chat template from the GGUF header), shared by both workers."""
    from routerag.llm.base import Message
    from routerag.llm.gguf_meta import gguf_chat_template
    from routerag.llm.template import ChatTemplate
    from routerag.strategies.prompts import routerag_prompt

    source, bos, eos = gguf_chat_template(model_path)
    template = ChatTemplate(source or "", bos, eos)
    docs = "\n".join(f"Doc {i + 1}: {PASSAGE}" for i in range(6))
    prefill = template.render([
        Message(role="system", content="Answer the question using the documents."),
        Message(role="user", content=f"{docs}\nQuestion: What river runs through Paris?"),
    ])
    decode = template.render([Message(role="user", content="Count from 1 to 300, separated by commas.")])
    policy = [template.render([Message(role="user", content=routerag_prompt(q))]) for q in QUESTIONS]
    base_turn = [Message(role="user", content=routerag_prompt(QUESTIONS[1]))]
    turn1 = template.render(base_turn + [Message(role="assistant", content="<think>I need the river.</think>\n<search>")],
                            continue_final=True)
    turn2 = template.render(base_turn + [Message(
        role="assistant",
        content=f"<think>I need the river.</think>\n<search>river through Paris</search>\n<information>{PASSAGE}</information>\n<think>",
    )], continue_final=True)
    return {"model": str(model_path), "adapter": str(adapter), "threads": threads, "n_ctx": 2048, "prefill": prefill,
            "decode": decode, "policy": policy, "turn1": turn1, "turn2": turn2, "stops": STOPS, "grammar": GRAMMAR,
            "bad_grammar": BAD_GRAMMAR}


# ------------------------------------------------------------------ workers (one process each)


class LlamaCppPython:
    """llama-cpp-python through routerag's own backend (what `routerag ask` runs today)."""

    def __init__(self, job: dict[str, Any], adapter: str | None) -> None:
        from routerag.llm.llamacpp import LlamaCppModel

        self.m = LlamaCppModel(job["model"], n_ctx=job["n_ctx"], n_threads=job["threads"], lora_path=adapter)

    def reset(self) -> None:
        self.m.reset()

    def call(self, prompt: str, n: int, stop: list[str] | None = None, grammar: str | None = None) -> dict[str, Any]:
        from routerag.llm.base import GenerationParams, ModelError

        try:
            r = self.m.complete(prompt, GenerationParams(max_tokens=n, stop=stop or [], grammar=grammar))
        except ModelError as exc:
            return {"error": str(exc)}
        s = self.m.last_stats
        return {"text": r.text, "prompt_tokens": r.usage.prompt_tokens, "completion_tokens": s.completion_tokens if s else 0,
                "reused": s.reused_prompt_tokens if s else 0, "finish": r.finish_reason, "stop": r.stop_string}

    @staticmethod
    def info() -> str:
        import llama_cpp

        return f"llama-cpp-python {llama_cpp.__version__}: " + llama_cpp.llama_print_system_info().decode().strip()


class XLlamaCpp:
    """xllamacpp's in-process server (llama.cpp's own server code, no HTTP round trip)."""

    def __init__(self, job: dict[str, Any], adapter: str | None) -> None:
        import xllamacpp as xlc

        p = xlc.CommonParams()
        p.model.path = job["model"]
        p.n_ctx = job["n_ctx"]
        p.n_parallel = 1
        p.cpuparams.n_threads = job["threads"]
        p.cpuparams_batch.n_threads = job["threads"]
        p.warmup = False
        p.verbosity = -1
        if adapter:
            p.lora_adapters = [xlc.CommonAdapterLoraInfo(adapter, 1.0)]
        self.server = xlc.Server(p)
        self.fresh = True

    def reset(self) -> None:
        self.fresh = True

    def call(self, prompt: str, n: int, stop: list[str] | None = None, grammar: str | None = None) -> dict[str, Any]:
        req: dict[str, Any] = {"prompt": prompt, "n_predict": n, "temperature": 0.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0,
                               "repeat_penalty": 1.0, "seed": 0, "stop": stop or [], "cache_prompt": not self.fresh,
                               "verbose": True}
        if grammar:
            req["grammar"] = grammar
        self.fresh = False
        r = self.server.handle_completions(req)
        if isinstance(r, str):
            r = json.loads(r)
        if "error" in r:
            return {"error": str(r["error"])}
        t = r.get("timings", {})
        verbose = r.get("__verbose", {})
        stop_type = verbose.get("stop_type")
        stopping = verbose.get("stopping_word") or None
        return {"text": r["choices"][0]["text"], "prompt_tokens": r["usage"]["prompt_tokens"],
                "completion_tokens": t.get("predicted_n"), "reused": t.get("cache_n", 0),
                "finish": {"word": "stop", "eos": "eos", "limit": "length"}.get(stop_type, stop_type), "stop": stopping}

    @staticmethod
    def info() -> str:
        import xllamacpp as xlc

        return f"xllamacpp {xlc.__version__}: " + xlc.get_system_info().strip()


def _timed(fn: Any, *args: Any, **kw: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn(*args, **kw)
    return time.perf_counter() - start, out


def worker(binding: str) -> None:
    job = json.load(sys.stdin)
    cls = {"llama-cpp-python": LlamaCppPython, "xllamacpp": XLlamaCpp}[binding]
    out: dict[str, Any] = {"info": cls.info()}
    load_s, m = _timed(cls, job, job["adapter"])
    out["load_s"] = load_s
    m.reset()
    t, r = _timed(m.call, job["prefill"], 1)
    out["prefill_tok_s"], out["prefill_tokens"] = r["prompt_tokens"] / t, r["prompt_tokens"]
    m.reset()
    m.call(job["decode"], 1)  # the prompt is cached; the timed call replays one token and decodes
    t, r = _timed(m.call, job["decode"], 64)
    out["decode_tok_s"], out["decode_tokens"] = r["completion_tokens"] / t, r["completion_tokens"]
    m.reset()
    out["turn1"] = m.call(job["turn1"], 16, stop=job["stops"])
    t, r = _timed(m.call, job["turn2"], 1)
    out["turn2_warm_ms"], out["turn2_reused"], out["turn2_prompt"] = t * 1000, r["reused"], r["prompt_tokens"]
    m.reset()
    t, r = _timed(m.call, job["turn2"], 1)
    out["turn2_cold_ms"] = t * 1000
    if not job.get("checks", True):
        json.dump(out, sys.stdout)
        return
    # capability checks: greedy policy outputs (with the adapter) and their stop strings
    out["policy"] = []
    for prompt in job["policy"]:
        m.reset()
        out["policy"].append(m.call(prompt, 48, stop=job["stops"]))
    m.reset()
    out["grammar"] = m.call(job["turn2"].rsplit("<think>", 1)[0], 24, grammar=job["grammar"])
    m.reset()
    out["bad_grammar"] = m.call(job["prefill"], 4, grammar=job["bad_grammar"])
    out["alive_after_bad_grammar"] = "text" in m.call(job["prefill"], 2)
    del m
    # the base model alone: the adapter must change at least one of these greedy outputs
    base = cls(job, None)
    out["base_policy"] = []
    for prompt in job["policy"]:
        base.reset()
        out["base_policy"].append(base.call(prompt, 48, stop=job["stops"]))
    json.dump(out, sys.stdout)


# ------------------------------------------------------------------ the parent: rounds and the table


def run_worker(python: str, binding: str, job: dict[str, Any]) -> dict[str, Any]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([python, __file__, "--worker", binding], input=json.dumps(job), capture_output=True, text=True,
                          env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{binding} worker failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


MEASURES = [("load_s", "load with adapter, s", False), ("prefill_tok_s", "prefill tok/s", True),
            ("decode_tok_s", "decode tok/s", True), ("turn2_warm_ms", "turn 2 warm (prefix reused), ms", False),
            ("turn2_cold_ms", "turn 2 cold, ms", False)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", choices=["llama-cpp-python", "xllamacpp"], help=argparse.SUPPRESS)
    parser.add_argument("--xl-python", default=sys.executable, help="interpreter that has xllamacpp")
    parser.add_argument("--lcp-python", default=sys.executable, help="interpreter that has llama-cpp-python and routerag's deps")
    parser.add_argument("--model", default="bundled:qwen2.5-coder-0.5b")
    parser.add_argument("--adapter", default=None, help="LoRA GGUF or policy:NAME (default: the shipped 0.5B policy)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="also write every round's raw results here")
    parser.add_argument("--table-from", type=Path, default=None, help="print the table of a --json file and exit")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker)
        return
    if args.table_from:
        saved = json.loads(args.table_from.read_text(encoding="utf-8"))
        print_table(saved["rounds"], Path(saved["model"]), Path(saved["adapter"]), saved["threads"])
        return
    from routerag.llm.resolve import resolve_model_file

    model_path = resolve_model_file(args.model)
    from routerag.llm.config import lora_path_of

    adapter = lora_path_of(args.adapter or "policy:routerag-sft-qwen2.5-coder-0.5b")
    job = build_job(model_path, adapter, args.threads)
    pythons = {"llama-cpp-python": args.lcp_python, "xllamacpp": args.xl_python}
    rounds: list[dict[str, dict[str, Any]]] = []
    for i in range(args.rounds):
        order = ["llama-cpp-python", "xllamacpp"] if i % 2 == 0 else ["xllamacpp", "llama-cpp-python"]
        result: dict[str, dict[str, Any]] = {}
        for b in order:
            load = os.getloadavg()[0]
            print(f"round {i + 1}/{args.rounds}: {b} (load average {load:.1f})", file=sys.stderr, flush=True)
            result[b] = run_worker(pythons[b], b, job | {"checks": i == 0}) | {"load_avg": load}  # the checks are greedy: once
        rounds.append(result)
        if args.json:  # after every round, so a run cut short still leaves its finished rounds
            args.json.write_text(json.dumps({"model": str(model_path), "adapter": str(adapter), "threads": args.threads,
                                             "rounds": rounds}, indent=1), encoding="utf-8")
    print_table(rounds, model_path, adapter, args.threads)


def print_table(rounds: list[dict[str, dict[str, Any]]], model_path: Path, adapter: Path, threads: int) -> None:
    med = statistics.median
    lcp, xl = "llama-cpp-python", "xllamacpp"
    print(f"model {model_path.name} + adapter {adapter.parent.name}; {threads} threads; {len(rounds)} rounds, "
          f"load average {min(r[b]['load_avg'] for r in rounds for b in r):.1f}-{max(r[b]['load_avg'] for r in rounds for b in r):.1f} "
          f"on {os.cpu_count()} cores")
    print(f"- {rounds[0][lcp]['info']}\n- {rounds[0][xl]['info']}\n")
    print("| measure | llama-cpp-python | xllamacpp | ratio xl/lcp (median, min-max) | better |")
    print("|---|---|---|---|---|")
    for key, label, higher in MEASURES:
        ratios = [r[xl][key] / r[lcp][key] for r in rounds]
        good = med(ratios) >= 1 if higher else med(ratios) <= 1
        print(f"| {label} | {med(r[lcp][key] for r in rounds):.4g} | {med(r[xl][key] for r in rounds):.4g} | "
              f"{med(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | {'xllamacpp' if good else 'llama-cpp-python'} |")
    a, b = rounds[0][lcp], rounds[0][xl]
    print(f"\nprompt tokens: prefill {a['prefill_tokens']} / {b['prefill_tokens']}, turn 2 {a['turn2_prompt']} / {b['turn2_prompt']} "
          f"(reused {a['turn2_reused']} / {b['turn2_reused']}); decode tokens {a['decode_tokens']} / {b['decode_tokens']}")
    print("\n| check | llama-cpp-python | xllamacpp | same |\n|---|---|---|---|")
    for i, (pa, pb) in enumerate(zip(a["policy"], b["policy"])):
        print(f"| policy {i + 1} greedy (adapter) | {pa['text']!r} [{pa['finish']}, {pa['stop']}] | {pb['text']!r} [{pb['finish']}, {pb['stop']}] "
              f"| {pa['text'] == pb['text'] and pa['stop'] == pb['stop']} |")
    changed = [x["text"] != y["text"] for x, y in zip(a["policy"], a["base_policy"])]
    changed_xl = [x["text"] != y["text"] for x, y in zip(b["policy"], b["base_policy"])]
    print(f"| adapter changes the base model's output (prompts 1-3) | {changed} | {changed_xl} | {changed == changed_xl} |")
    print(f"| prompt token counts (policy 1) | {a['policy'][0]['prompt_tokens']} | {b['policy'][0]['prompt_tokens']} | "
          f"{a['policy'][0]['prompt_tokens'] == b['policy'][0]['prompt_tokens']} |")
    print(f"| turn 1 with stops | {a['turn1']['text']!r} [{a['turn1']['stop']}] | {b['turn1']['text']!r} [{b['turn1']['stop']}] | "
          f"{a['turn1']['text'] == b['turn1']['text']} |")
    ga, gb = a["grammar"], b["grammar"]
    print(f"| GBNF grammar | {ga.get('text', ga.get('error'))!r} | {gb.get('text', gb.get('error'))!r} | {ga.get('text') == gb.get('text')} |")
    print(f"| invalid grammar: error, process alive | {'error' in a['bad_grammar']}, {a['alive_after_bad_grammar']} | "
          f"{'error' in b['bad_grammar']}, {b['alive_after_bad_grammar']} | |")


if __name__ == "__main__":
    main()
