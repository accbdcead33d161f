"""The retrieval server under verl's search-client load: Ray Serve with 1 vs 2 replicas, and the
plain in-process server (``serve-retrieval`` without ``--ray``) as the baseline.

    nice -n 19 python3 benchmarks/bench_ray_serve.py                      # dense over 1,000 2Wiki passages
    nice -n 19 python3 benchmarks/bench_ray_serve.py --index DIR --replicas 1 2 --waves 4

The load is the shape verl's Search-R1 tool sends to a retrieval server: ``--in-flight`` (120)
requests at once, each ``POST /retrieve/searchr1`` with 3 queries, ``topk`` 3, ``return_scores``,
a 30 s client timeout. ``--waves`` x in-flight requests are sent per setup (a new request starts
as soon as one finishes); latency is per request, throughput is requests and queries per second
over the whole run. Ray is started locally on ``--cpus`` CPUs (``routerag.raycluster.LocalHead``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from routerag.corpus.datasets import data_root
from routerag.sources.registry import bundle_sources

CORPUS = data_root() / "2wikimultihopqa" / "2wikimultihopqa_corpus.json"
QUESTIONS = CORPUS.with_name("2wikimultihopqa_questions.jsonl")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_bundle(n_docs: int) -> Path:
    from routerag.corpus.schema import Document
    from routerag.index.bundle import build_index

    rows = json.loads(CORPUS.read_text(encoding="utf-8"))[:n_docs]
    directory = Path(tempfile.mkdtemp(prefix="bench-ray-serve-")) / "bundle"
    build_index([Document.make(r["title"], r["text"]) for r in rows], directory, components=("dense",))
    return directory


def questions(n: int) -> list[str]:
    out = []
    with QUESTIONS.open(encoding="utf-8") as handle:
        for line in handle:
            out.append(json.loads(line)["question"])
            if len(out) >= n:
                break
    return out


async def verl_load(url: str, pool: list[str], *, in_flight: int, total: int, per_request: int, topk: int, timeout: float) -> dict:
    latencies: list[float] = []
    failures: dict[str, int] = {}
    next_request = 0
    limits = httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight)
    async with httpx.AsyncClient(base_url=url, timeout=timeout, limits=limits) as client:

        async def lane() -> None:
            nonlocal next_request
            while next_request < total:
                i = next_request
                next_request += 1
                qs = [pool[(i * per_request + j) % len(pool)] for j in range(per_request)]
                t0 = time.perf_counter()
                try:
                    r = await client.post("/retrieve/searchr1", json={"queries": qs, "topk": topk, "return_scores": True})
                    ok = r.status_code == 200 and len(r.json()["result"]) == per_request
                    why = "" if ok else f"HTTP {r.status_code}"
                except httpx.TimeoutException:
                    why = "timeout"
                except httpx.HTTPError as exc:
                    why = type(exc).__name__
                if why:
                    failures[why] = failures.get(why, 0) + 1
                else:
                    latencies.append((time.perf_counter() - t0) * 1000)

        t0 = time.perf_counter()
        await asyncio.gather(*(lane() for _ in range(in_flight)))
        wall = time.perf_counter() - t0
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] if latencies else None
    return {
        "requests": total, "ok": len(latencies), "failures": failures, "wall_s": round(wall, 2),
        "requests_per_s": round(len(latencies) / wall, 1), "queries_per_s": round(len(latencies) * per_request / wall, 1),
        "p50_ms": round(statistics.median(latencies), 1) if latencies else None, "p99_ms": round(p99, 1) if p99 else None,
    }


def wait_healthy(url: str, timeout: float = 600) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise RuntimeError(f"{url} did not become healthy")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, help="a bundle with a dense component (default: built over --docs 2Wiki passages)")
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--in-flight", type=int, default=120)
    parser.add_argument("--per-request", type=int, default=3)
    parser.add_argument("--topk", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--waves", type=int, default=4, help="requests sent = waves x in-flight")
    parser.add_argument("--cpus", type=int, default=2, help="ray.init(num_cpus=...)")
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    index = args.index or build_bundle(args.docs)
    pool = questions(2000)
    total = args.waves * args.in_flight
    shape = dict(in_flight=args.in_flight, total=total, per_request=args.per_request, topk=args.topk, timeout=args.timeout)
    report: dict = {"index": str(index), "load": shape, "runs": {}}

    if not args.skip_baseline:  # serve-retrieval without --ray: one uvicorn process
        from routerag.edge.serving import BackgroundServer
        from routerag.index.bundle import load_index
        from routerag.server.retrieval_app import create_retrieval_app
        from routerag.server.settings import SearchR1Settings, ServerSettings

        settings = ServerSettings(searchr1=SearchR1Settings(default_source="passage"), micro_batching=True)
        with BackgroundServer(create_retrieval_app(bundle_sources(load_index(index)), settings)) as running:
            asyncio.run(verl_load(running.url, pool, **{**shape, "total": args.in_flight}))  # warm-up
            report["runs"]["no-ray (micro_batching on)"] = asyncio.run(verl_load(running.url, pool, **shape))
            print(json.dumps(report["runs"]), flush=True)

    from routerag.raycluster import LocalHead

    head = LocalHead(num_cpus=args.cpus)  # before anything imports ray
    from ray import serve

    from routerag.server.ray_serve import APP_NAME, RayServeSettings, serve_on_ray
    from routerag.server.settings import SearchR1Settings, ServerSettings
    for replicas in args.replicas:
        settings = ServerSettings(port=free_port(), searchr1=SearchR1Settings(default_source="passage"))
        t0 = time.perf_counter()
        serve_on_ray(index, None, settings, RayServeSettings(replicas=replicas, encoder_cpus=0.5), blocking=False)
        url = f"http://127.0.0.1:{settings.port}"
        wait_healthy(url)
        started = time.perf_counter() - t0
        asyncio.run(verl_load(url, pool, **{**shape, "total": args.in_flight}))  # warm-up
        result = asyncio.run(verl_load(url, pool, **shape))
        report["runs"][f"ray serve, {replicas} replica(s)"] = {**result, "startup_s": round(started, 1)}
        print(json.dumps(report["runs"]), flush=True)
        serve.delete(APP_NAME)
        serve.shutdown()
    head.stop()
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
