"""Routing accuracy on the held-out R1-Router steps per gold kind (text / table / image / stop),
for stored ``r1-router-step`` runs (a no-model rule's or a policy's), scored by the training
table's route-step scores (:func:`routerag.eval.training_table.route_step_scores`).

    python3 docs/experiments/scripts/r1router_rule_yardstick.py LABEL=RUN[,RUN] [LABEL=RUN ...]
"""

from __future__ import annotations

import argparse
from pathlib import Path

KINDS = {"Text Retriever": "text", "Table Retriever": "table", "Text Image Retriever": "image", "None": "stop"}


def per_kind(runs: str) -> tuple[dict[str, tuple[int, int]], int, int]:
    from routerag.eval.report import load_runs
    from routerag.eval.training_table import route_step_scores

    loaded = load_runs([Path(r) for r in runs.split(",")])
    scores = route_step_scores(loaded)
    gold = {rec.qid: rec.routing.gold_source for run in loaded for rec in run.records if rec.routing is not None}
    out: dict[str, tuple[int, int]] = {}
    for kind, name in KINDS.items():
        keys = [k for k in scores if gold[k] == kind]
        out[name] = (int(sum(scores[k]["routing acc."] for k in keys)), len(keys))
    return out, int(sum(v["routing acc."] for v in scores.values())), len(scores)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="LABEL=RUN_DIR (lanes of one sample: DIR,DIR)")
    args = parser.parse_args()
    print("| | " + " | ".join(KINDS.values()) + " | all |\n|---|" + "---:|" * (len(KINDS) + 1))
    for item in args.runs:
        label, _, runs = item.partition("=")
        kinds, right, n = per_kind(runs)
        cells = [f"{r}/{k} ({100 * r / k:.0f} %)" if k else "–" for r, k in kinds.values()]
        print(f"| {label} | " + " | ".join(cells) + f" | {right}/{n} ({100 * right / n:.1f} %) |")


if __name__ == "__main__":
    main()
