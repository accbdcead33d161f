"""Paired cost comparison of two evaluation runs: per question, the system's retrieval turns,
tokens and latency against the baseline's on the same questions, with the paired bootstrap CI
and the exact sign test that `routerag report` uses for accuracy.

    python3 docs/experiments/scripts/paired_cost.py BASELINE_RUN SYSTEM_RUN [SYSTEM_RUN ...]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from routerag.eval.bootstrap import paired_bootstrap
from routerag.eval.report import LoadedRun, load_run
from routerag.eval.signtest import sign_test

COSTS: dict[str, Callable[..., float]] = {
    "retrieval turns": lambda r: float(r.cost.retrieval_turns),
    "tokens": lambda r: float(r.cost.total_tokens),
    "latency s": lambda r: r.cost.latency_ms / 1000.0,
}


def rows(base: LoadedRun, system: LoadedRun) -> list[str]:
    by_qid = {r.qid: r for r in base.records}
    pairs = [(by_qid[r.qid], r) for r in system.records if r.qid in by_qid]
    dataset = base.header.dataset
    out = []
    for name, cost in COSTS.items():
        a = [cost(x) for x, _ in pairs]
        b = [cost(y) for _, y in pairs]
        d = paired_bootstrap(a, b)
        s = sign_test(a, b)
        out.append(f"| {dataset} | {base.label} | {system.label} | {name} | {d.n} | {d.mean_a:.2f} | {d.mean_b:.2f} | "
                   f"{d.diff:+.2f} [{d.low:+.2f}, {d.high:+.2f}] | {s.b_better} / {s.a_better} | {s.p_value:.2g} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("baseline")
    parser.add_argument("systems", nargs="+")
    args = parser.parse_args()
    base = load_run(args.baseline)
    print("| Dataset | Baseline | System | Cost | n | Baseline | System | Δ [95% CI] | higher / lower | p (sign test) |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|")
    for path in args.systems:
        for line in rows(base, load_run(path)):
            print(line)


if __name__ == "__main__":
    main()
