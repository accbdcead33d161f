"""How long ``/health`` waits while the service's warm-up builds a model, with the model built in
a child process (``model_builds: child-process``, the default) and in the service's own process
(``in-process``), in one run.

The service (bundled 0.5B, ``routerag``'s shipped policy adapter, no sources) is served from this
process; an open-loop poller in another process sends ``/health`` on a fixed 10 ms schedule, and a
poll's latency counts from when it was due, so a stall of T seconds shows as T / 10 ms slow polls.
The polls counted are those due from when the service serves until its warm-up ended (the
strategy's preparation, which unpacks the adapter, and the model's build).

    python3 benchmarks/bench_service_model_builds.py            # both modes, one round each
    python3 benchmarks/bench_service_model_builds.py --rounds 3

Prints one markdown table (docs/guides/service.md quotes it with the load average).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

POLLER = r"""
import json, sys, time
import httpx
print("imported", flush=True)
polls, every = [], 0.01
with httpx.Client(base_url=sys.argv[1], timeout=60) as client:
    first = time.monotonic()
    for i in range(int(float(sys.argv[2]) / every)):
        due = first + i * every  # a fixed schedule: a poll that waits for a stalled one is late too
        time.sleep(max(0.0, due - time.monotonic()))
        client.get("/health")
        polls.append((due, time.monotonic()))
print(json.dumps(polls), flush=True)
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def one_round(mode: str, timeout_s: float) -> dict[str, float]:
    from routerag.edge.serving import BackgroundServer
    from routerag.llm.config import ModelConfig
    from routerag.llm.scripted import ScriptedModel
    from routerag.server.app import create_app
    from routerag.server.settings import ServiceSettings
    from routerag.sources.sourceset import SourceSet

    with tempfile.TemporaryDirectory(prefix="bench-model-builds-") as tmp:
        settings = ServiceSettings(data_dir=Path(tmp), ui=False, warm_up=True, warm_up_strategy="routerag",
                                   model_builds=mode)
        app = create_app(ScriptedModel(lambda *_: "x"), SourceSet(), settings, model_config=ModelConfig())
        server = BackgroundServer(app)
        poller = subprocess.Popen([sys.executable, "-c", POLLER, server.url, str(timeout_s)], stdout=subprocess.PIPE,
                                  text=True)
        try:
            assert poller.stdout is not None and poller.stdout.readline().strip() == "imported"
            with server:
                serving = time.monotonic()  # the warm-up starts with the service; CLOCK_MONOTONIC is system-wide
                out, _ = poller.communicate(timeout=timeout_s + 60)
                warm = httpx.get(f"{server.url}/ready", timeout=60).json()["warm_up"]
        finally:
            poller.kill()
    if warm["state"] != "done":
        raise SystemExit(f"{mode}: the warm-up did not finish: {warm}")
    ended = serving + warm["seconds"]
    waits = [answered - due for due, answered in json.loads(out) if serving <= due <= ended]
    return {"polls": len(waits), "p50": percentile(waits, 0.5), "p95": percentile(waits, 0.95), "max": max(waits),
            "warm_up_s": warm["seconds"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--timeout-s", type=float, default=15.0, help="how long the poller polls (past the warm-up)")
    args = parser.parse_args()
    rows: dict[str, list[dict[str, float]]] = {"child-process": [], "in-process": []}
    for _ in range(args.rounds):
        for mode in rows:
            rows[mode].append(one_round(mode, args.timeout_s))
    print(f"load average before the table: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| model_builds | rounds | /health polls in the warm-up | p50 ms | p95 ms | max ms | warm-up s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for mode, results in rows.items():
        def mean(key: str, results: list[dict[str, float]] = results) -> float:
            return sum(r[key] for r in results) / len(results)
        print(f"| {mode} | {len(results)} | {mean('polls'):.0f} | {mean('p50') * 1000:.0f} | {mean('p95') * 1000:.0f} "
              f"| {mean('max') * 1000:.0f} | {mean('warm_up_s'):.1f} |")
    child, inproc = (sum(r["p95"] for r in rows[m]) / args.rounds for m in rows)
    print(f"\np95 ratio, in-process / child-process: {inproc / child:.1f}x")


if __name__ == "__main__":
    main()
