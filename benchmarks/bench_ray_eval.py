"""``routerag eval --engine ray`` against the thread engine: the runner's own cost per question.

    nice -n 10 python3 benchmarks/bench_ray_eval.py --questions 200 1000

The strategy is ``rule`` (no model call, no index: it answers in well under a millisecond), so
the times are what each engine adds around a strategy — Ray start excluded (a local head with 2
CPUs is started first), actor start-up included (each Ray run starts its pool of 2 actors, which
import routerag and build the strategy) — and the fsynced append per record that both engines
share. They say nothing about throughput with a real model, where the strategy's time dominates.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--actors", type=int, default=2)
    args = parser.parse_args()

    from routerag.raycluster import LocalHead

    t0 = time.perf_counter()
    head = LocalHead(num_cpus=2)
    print(f"ray start: {time.perf_counter() - t0:.1f} s", flush=True)
    from routerag.api import EvaluateParams, evaluate
    from routerag.eval.config import EvalConfig
    from routerag.llm.config import ModelConfig

    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n in args.questions:
                config = EvalConfig(dataset="2wiki", strategy="rule", limit=n, model=ModelConfig(backend="scripted", scripted_outputs=["-"]))
                for engine, concurrency in (("thread", 1), ("thread", args.actors), ("ray", args.actors), ("ray", args.actors)):
                    out = Path(tmp) / f"{n}-{engine}-{concurrency}-{len(rows)}"
                    t = time.perf_counter()
                    outcome = evaluate(EvaluateParams(config=config, out=out, engine=engine, concurrency=concurrency, progress=False)).outcome
                    seconds = time.perf_counter() - t
                    row = {"questions": n, "engine": engine, "concurrency": concurrency, "answered": outcome.ran,
                           "seconds": round(seconds, 2), "questions_per_s": round(outcome.ran / seconds, 1)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    finally:
        head.stop()


if __name__ == "__main__":
    main()
