"""Paired comparison of two policies on the held-out R1-Router steps: routing accuracy, format
errors and sub-question similarity of the decompose-and-route steps (two ``routerag eval`` runs of
``r1-router-step``), and the parts of the intermediate- and final-answer steps (two
``scripts/score_r1router_steps.py`` outputs). Paired on the steps both scored (a partial run is
compared on what it finished); seeded bootstrap CI and exact sign test (routerag.eval).

    python3 scripts/compare_r1router_steps.py --runs runs/eval/heldout-untrained runs/eval/heldout-sft \\
        --steps runs/steps/untrained-ans-final.jsonl runs/steps/sft-ans-final.jsonl \\
        --labels "untrained 0.5B" "SFT 0.5B" --out docs/results/r1router-training/comparison.csv
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path


def _ret_scores(runs: str) -> dict[str, dict[str, float]]:
    """Per qid, over the comma-separated run directories of one policy (lanes of one sample: the
    first record of a qid counts): the training table's route-step scores plus the sub-question's F1."""
    from routerag.eval.report import load_runs
    from routerag.eval.training_table import route_step_scores

    loaded = load_runs([Path(run) for run in runs.split(",")])
    scores = route_step_scores(loaded)
    f1: dict[str, float] = {}
    for run in loaded:
        for rec in run.records:
            f1.setdefault(rec.qid, float(rec.metrics["f1"] or 0.0))
    return {qid: {**values, "sub-question F1": f1[qid]} for qid, values in scores.items()}


def _step_scores(path: Path) -> dict[str, dict[str, float]]:
    out = {}
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        rec = json.loads(line)
        key = f"{rec['step_type']}:{rec['trajectory']}:{i}"
        part = "intermediate F1-recall" if rec["step_type"] == "ans" else "final accuracy"
        out[key] = {part: float(rec.get("f1_recall", rec.get("accuracy", 0.0))), "format errors": 1.0 - float(rec["format"]),
                    "gated step reward": float(rec["reward"])}
    return out


def _rows(kind: str, a: dict[str, dict[str, float]], b: dict[str, dict[str, float]], labels: list[str]) -> list[list[str]]:
    from routerag.eval.bootstrap import paired_bootstrap
    from routerag.eval.signtest import sign_test

    rows = []
    shared = [k for k in a if k in b]
    metrics = list(dict.fromkeys(m for k in shared for m in a[k]))
    for metric in metrics:
        keys = [k for k in shared if metric in a[k]]
        if not keys:
            continue
        xs, ys = [100 * a[k][metric] for k in keys], [100 * b[k][metric] for k in keys]
        d, s = paired_bootstrap(xs, ys, seed=0), sign_test(xs, ys)
        rows.append([kind, labels[0], labels[1], metric, str(d.n), f"{d.mean_a:.1f}", f"{d.mean_b:.1f}", f"{d.diff:+.1f}",
                     f"[{d.low:+.1f}, {d.high:+.1f}]", f"{s.b_better} / {s.a_better}", f"{s.p_value:.3f}"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs=2, required=True, help="two evaluation runs (each: DIR or DIR,DIR for lanes of one sample)")
    parser.add_argument("--steps", nargs=2, type=Path, default=None)
    parser.add_argument("--labels", nargs=2, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    rows = _rows("decompose-and-route", *(_ret_scores(r) for r in args.runs), args.labels)
    if args.steps:
        a, b = (_step_scores(p) for p in args.steps)
        for kind, prefix in (("intermediate answer", "ans:"), ("final answer", "final:")):
            rows += _rows(kind, {k: v for k, v in a.items() if k.startswith(prefix)},
                          {k: v for k, v in b.items() if k.startswith(prefix)}, args.labels)
    header = ["Steps", "Baseline", "System", "Metric", "n", "Baseline %", "System %", "Δ", "95% CI", "better / worse",
              "p (sign test)"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([header, *rows])
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
