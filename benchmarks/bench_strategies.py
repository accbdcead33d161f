"""Per-strategy cost benchmark: every strategy on the same evenly spaced questions with the
embedded model, through the real evaluation runner (``routerag eval``), then one table.

    python3 benchmarks/bench_strategies.py                                  # 10 2Wiki questions
    python3 benchmarks/bench_strategies.py --strategies routerag,vanilla --limit 3
    python3 benchmarks/bench_strategies.py --table-only --runs runs/bench-strategies

Each strategy is one resumable run directory under ``--runs`` (an interrupted benchmark goes on
where it stopped). The table splits wall time per question into model time (every model call:
decomposition, routing, judging, answering, fusion) and retrieval time, and gives tokens per
question, retrieval calls per question by mode or source, the share of questions with at least one
protocol (format) error, and EM/F1. Run it with the response cache off (the default) so that model
time is real decoding, not cache hits.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_STRATEGIES = (
    "direct,vanilla,ircot,iter-retgen,routerag,routerag-passage,routerag-graph,routerag-hybrid,"
    "routerag-random,graphrag-r1,r1-router,hard-route,realroute"
)


# ``STRATEGY+VARIANT`` entries run a strategy with options on (e.g. ``routerag+grammar``)
VARIANTS = {"grammar": ["params.grammar=true"], "few-shot": ["params.few_shot=true"]}


def run_strategy(entry: str, args: argparse.Namespace) -> float:
    out = args.runs / f"{args.dataset}-{entry}"
    strategy, *variants = entry.split("+")
    cmd = [
        sys.executable, "-m", "routerag.cli.main", "eval",
        "--dataset", args.dataset, "--strategy", strategy, "--limit", str(args.limit),
        "--out", str(out), "--no-progress",
        "--set", f"components={args.components}", "--set", f"label={entry}",
    ]
    for variant in variants:
        for override in VARIANTS[variant]:
            cmd += ["--set", override]
    for override in args.set:
        cmd += ["--set", override]
    started = time.perf_counter()
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        print(f"[{strategy}] routerag eval failed (rc={result.returncode}):\n{result.stderr[-2000:]}", file=sys.stderr)
    return time.perf_counter() - started


def load_summary(run: Path) -> dict | None:
    path = run / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else None


def table(runs: list[Path]) -> str:
    head = (
        "| strategy | n | EM | F1 | s/question | model s | retrieval s | model calls | prompt tok | completion tok "
        "| retrieval calls (by mode/source) | format-error rate |"
    )
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for run in runs:
        summary = load_summary(run)
        if summary is None:
            lines.append(f"| {run.name} | (no summary) |" + " |" * 10)
            continue
        n = max(summary["n_done"], 1)
        cost = summary["cost"]
        by = summary.get("calls_by_source") or summary.get("calls_by_mode") or {}
        calls = ", ".join(f"{k} {v / n:.1f}" for k, v in sorted(by.items())) or "0"
        lines.append(
            f"| {summary['label']} | {summary['n_done']} | {summary['metrics'].get('em', 0):.2f} "
            f"| {summary['metrics'].get('f1', 0):.2f} | {cost['latency_ms'] / 1000:.1f} | {cost['model_ms'] / 1000:.1f} "
            f"| {cost['retrieval_ms'] / 1000:.2f} | {cost['model_calls']:.1f} | {cost['prompt_tokens']:.0f} "
            f"| {cost['completion_tokens']:.0f} | {calls} | {cost['format_error_rate']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="2wiki")
    parser.add_argument("--limit", type=int, default=10, help="evenly spaced questions per strategy")
    parser.add_argument("--strategies", default=DEFAULT_STRATEGIES)
    parser.add_argument("--components", default="[dense,bm25,graph]", help="index components (one shared index)")
    parser.add_argument("--runs", type=Path, default=Path("runs/bench-strategies"))
    parser.add_argument("--set", action="append", default=[], help="extra EvalConfig override (repeatable)")
    parser.add_argument("--table-only", action="store_true", help="print the table of existing runs, run nothing")
    args = parser.parse_args()
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    runs = [args.runs / f"{args.dataset}-{s}" for s in strategies]
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} CPUs\n")
    if not args.table_only:
        for strategy in strategies:
            seconds = run_strategy(strategy, args)
            print(f"{strategy}: {seconds:.0f} s wall (incl. model and index load)", flush=True)
    print(f"\n## {args.dataset}: {args.limit} evenly spaced questions, means per question\n")
    print(table(runs))


if __name__ == "__main__":
    main()
