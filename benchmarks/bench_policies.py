"""The two shipped RouteRAG policies side by side, in one run, on the same questions: seconds a
question, peak memory, download size, and the open-answer EM their evaluation runs gave.

Each (policy, round) runs in its own process (so peak RSS is that policy's alone), loads the
bundled base with its shipped adapter and the demo index, answers the same demo questions with
the ``routerag`` strategy, and reports per-question seconds (load excluded), searches and tokens.
Rounds alternate the policies (0.5B, 1.5B, 0.5B, 1.5B, ...) so a machine whose load drifts
slows both alike; compare the ratio column, not the absolute seconds.

    python3 benchmarks/bench_policies.py                    # 3 demo questions, 2 rounds
    python3 benchmarks/bench_policies.py -n 5 --rounds 1 --threads 2

Needs the ``local`` and ``model-1p5b`` extras. Accuracy is read from each policy's shipped
evaluation card (``data/policies/<name>/eval_comparisons.csv``), not measured here.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

BASES = ("bundled:qwen2.5-coder-0.5b", "bundled:qwen2.5-coder-1.5b")


def worker(base: str, n_questions: int, threads: int | None) -> dict:
    from routerag.api import AskParams, open_asker
    from routerag.corpus.datasets import load_dataset
    from routerag.eval.config import EvalConfig
    from routerag.eval.metrics import exact_match
    from routerag.llm.config import ModelConfig

    model = ModelConfig(model=base, n_threads=threads)
    params = AskParams(config=EvalConfig(strategy="routerag", dataset="demo", model=model), shipped_policy=True)
    start = time.perf_counter()
    asker = open_asker(params)
    load_s = time.perf_counter() - start
    rows = []
    for q in load_dataset("demo", n_questions=n_questions).questions:
        t0 = time.perf_counter()
        trace = asker.ask(q)
        rows.append({
            "qid": q.qid, "seconds": time.perf_counter() - t0, "searches": trace.retrieval_turns,
            "tokens": trace.prompt_tokens + trace.completion_tokens, "answer": trace.answer,
            "em": exact_match(trace.answer, q.answers),
        })
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"base": base, "load_s": load_s, "rows": rows, "peak_rss_mb": rss_mb}


def download_mb(base: str) -> float:
    from routerag.llm.bundled import bundled_spec

    spec = bundled_spec(base)
    return (spec.size or 0) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--questions", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all cores)")
    ap.add_argument("--json", default=None, help="also write the raw results here")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.questions, args.threads)))
        return

    from rich.console import Console
    from rich.table import Table

    from routerag.strategies.shipped import policy_card

    runs: dict[str, list[dict]] = {b: [] for b in BASES}
    for r in range(args.rounds):
        for base in BASES:
            cmd = [sys.executable, __file__, "--worker", base, "-n", str(args.questions)]
            if args.threads:
                cmd += ["--threads", str(args.threads)]
            print(f"round {r + 1}: {base} ...", file=sys.stderr, flush=True)
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            runs[base].append(json.loads(out.strip().splitlines()[-1]))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(runs, fh, indent=1)

    per_q = {b: statistics.median(row["seconds"] for run in runs[b] for row in run["rows"]) for b in BASES}
    table = Table(title=f"shipped policies, {args.questions} demo questions x {args.rounds} rounds (median s a question)")
    for col in ("base + policy", "s / question", "ratio", "load s", "peak RSS MB", "download MB", "searches / q",
                "tokens / q", "demo EM", "open EM 2Wiki / MuSiQue / HotpotQA-d (vanilla same base)"):
        table.add_column(col, justify="left" if col.startswith("base") or col.startswith("open") else "right")
    for base in BASES:
        card = policy_card(base)
        rows = [row for run in runs[base] for row in run["rows"]]
        opens = " / ".join(f"{line.system:.1f} ({line.baseline:.1f})" for line in card.lines) if card else "n/a"
        table.add_row(
            f"{base} + {card.name if card else 'none'}", f"{per_q[base]:.1f}", f"{per_q[base] / per_q[BASES[0]]:.2f}x",
            f"{statistics.median(run['load_s'] for run in runs[base]):.1f}",
            f"{max(run['peak_rss_mb'] for run in runs[base]):.0f}", f"{download_mb(base):.0f}",
            f"{statistics.mean(row['searches'] for row in rows):.2f}", f"{statistics.mean(row['tokens'] for row in rows):.0f}",
            f"{statistics.mean(row['em'] for row in rows):.2f}", opens,
        )
    Console().print(table)


if __name__ == "__main__":
    main()
