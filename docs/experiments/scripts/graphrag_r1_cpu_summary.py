"""Tables of the GraphRAG-R1 CPU run (docs/experiments/2026-11-29-graphrag-r1-cpu.md): the stage-1
loss curve, per GRPO step the stage, reward, gradient norm and the retrievals of each rollout (from
``grpo/rollouts.jsonl``), and per evaluation run the format errors and searches per question.

    python3 docs/experiments/scripts/graphrag_r1_cpu_summary.py RUN_DIR [EVAL_RUN ...] [--out DIR]

With ``--out`` the tables are also written there as JSON (small files, for docs/results)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()] if path.is_file() else []


def sft_curve(run: Path) -> list[dict[str, Any]]:
    return [r for r in read_jsonl(run / "sft" / "metrics.jsonl") if "loss" in r]


def grpo_steps(run: Path, pra_until: int) -> list[dict[str, Any]]:
    metrics = {int(r["step"]): r for r in read_jsonl(run / "grpo" / "metrics.jsonl") if "step" in r}
    episodes: dict[int, list[dict[str, Any]]] = {}
    for rec in read_jsonl(run / "grpo" / "rollouts.jsonl"):
        if "trace" in rec:
            episodes.setdefault(int(rec["step"]), []).append(rec["trace"])
    out = []
    for step in sorted(episodes):
        traces = episodes[step]
        searches = [sum(s["kind"] == "search" for s in t["steps"]) for t in traces]
        errors = [sum(bool(s.get("format_error")) for s in t["steps"]) for t in traces]
        m = metrics.get(step, {})
        out.append({"step": step, "stage": "format+PRA" if step <= pra_until else "format+CAF",
                    "searches_per_rollout": searches, "format_errors_per_rollout": errors,
                    "answers": [t.get("answer") for t in traces],
                    **{k: m[k] for k in sorted(m) if k.startswith(("reward", "rewards/", "grad_norm", "loss"))}})
    return out


def eval_run(run: Path) -> dict[str, Any]:
    records = [r for r in read_jsonl(run / "results.jsonl") if r.get("trace")]
    n = len(records)
    steps = [r["trace"]["steps"] for r in records]
    searches = [sum(s["kind"] == "search" for s in st) for st in steps]
    invalid = [sum(s["kind"] == "format_error" for s in st) for st in steps]  # turns with no action (the repair cue follows)
    repaired = [sum(s["kind"] == "search" and bool(s.get("format_error")) for s in st) for st in steps]  # queries the planner replaced
    forced = sum(any(s.get("forced") for s in st) for st in steps)
    em = [float(r["metrics"].get("em") or 0.0) for r in records]
    f1 = [float(r["metrics"].get("f1") or 0.0) for r in records]
    return {"run": run.name, "questions": n, "searches_per_question": round(sum(searches) / max(n, 1), 2),
            "invalid_turns": sum(invalid), "questions_with_an_invalid_turn": sum(n > 0 for n in invalid),
            "searches_with_a_replaced_query": sum(repaired), "forced_answers": forced,
            "errors": sum(bool(r.get("error")) for r in records),
            "em": round(100 * sum(em) / max(n, 1), 1), "f1": round(100 * sum(f1) / max(n, 1), 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run", type=Path)
    ap.add_argument("evals", type=Path, nargs="*")
    ap.add_argument("--pra-until", type=int, default=2)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    tables = {"sft_loss": sft_curve(args.run), "grpo_steps": grpo_steps(args.run, args.pra_until),
              "evals": [eval_run(e) for e in args.evals]}
    print(json.dumps(tables, indent=1))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        for name, table in tables.items():
            (args.out / f"{name}.json").write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
