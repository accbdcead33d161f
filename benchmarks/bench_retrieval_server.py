"""Throughput and latency of ``POST /retrieve`` over loopback, against in-process retrieval.

    python3 benchmarks/bench_retrieval_server.py                        # builds a BM25 index over 1000 2Wiki passages
    python3 benchmarks/bench_retrieval_server.py --index DIR --source passage --requests 100
    python3 benchmarks/bench_retrieval_server.py --components dense,bm25 --source passage --burst 200 --only-burst

Scenarios (each a bounded number of requests): in-process ``SourceSet.retrieve`` (no HTTP),
one query per request, batches of 8 and 32, and 4 concurrent clients sending single queries.
``--burst N`` adds N single-query requests sent at once (asyncio, one connection each), against
a server with micro-batching off and then on (``ServerSettings.micro_batching``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from routerag.corpus.datasets import data_root
from routerag.edge.serving import BackgroundServer
from routerag.server.retrieval_app import create_retrieval_app
from routerag.server.settings import ServerSettings
from routerag.sources.base import RetrievalRequest
from routerag.sources.registry import bundle_sources
from routerag.sources.sourceset import SourceSet

DEFAULT_CORPUS = data_root() / "2wikimultihopqa" / "2wikimultihopqa_corpus.json"
DEFAULT_QUESTIONS = DEFAULT_CORPUS.with_name("2wikimultihopqa_questions.jsonl")


def load_sources(index: Path | None, corpus: Path, n_docs: int, components: list[str]) -> SourceSet:
    from routerag.index.bundle import build_index, load_index

    if index is None:
        from routerag.corpus.schema import Document

        rows = json.loads(corpus.read_text(encoding="utf-8"))[:n_docs]
        index = Path(tempfile.mkdtemp(prefix="bench-retrieval-")) / "bundle"
        build_index([Document.make(r["title"], r["text"]) for r in rows], index, components=components)
    return bundle_sources(load_index(index))


def load_queries(path: Path, n: int) -> list[str]:
    queries = []
    if path.is_file():
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if len(queries) >= n:
                    break
                queries.append(json.loads(line)["question"])
    return queries or [f"who was the queen of Lotharingia {i}" for i in range(n)]


def measure(label: str, calls: list[Callable[[], int]], workers: int = 1) -> dict:
    """Run every call (each returns its number of queries), ``workers`` at a time."""
    latencies: list[float] = []
    queries = 0
    lock = threading.Lock()
    pending = list(reversed(calls))

    def worker() -> None:
        nonlocal queries
        while True:
            with lock:
                if not pending:
                    return
                call = pending.pop()
            t0 = time.perf_counter()
            n = call()
            dt = (time.perf_counter() - t0) * 1000
            with lock:
                latencies.append(dt)
                queries += n

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    latencies.sort()
    return {
        "scenario": label,
        "requests": len(latencies),
        "q/req": queries // max(len(latencies), 1),
        "p50_ms": statistics.median(latencies),
        "p95_ms": latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))],
        "req/s": len(latencies) / wall,
        "queries/s": queries / wall,
    }


async def _burst(url: str, bodies: list[dict]) -> tuple[list[float], float, int]:
    limits = httpx.Limits(max_connections=len(bodies), max_keepalive_connections=len(bodies))
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def one(body: dict) -> tuple[float, int]:
            t0 = time.perf_counter()
            r = await client.post("/retrieve", json=body)
            return (time.perf_counter() - t0) * 1000, r.status_code

        await asyncio.gather(*(one(b) for b in bodies[:8]))  # open connections, warm up
        t0 = time.perf_counter()
        results = await asyncio.gather(*(one(b) for b in bodies))
        wall = time.perf_counter() - t0
    return [ms for ms, _ in results], wall, sum(status != 200 for _, status in results)


def burst(label: str, sources: SourceSet, settings: ServerSettings, bodies: list[dict]) -> dict:
    """All requests at once against a fresh server; latency is what each client waited."""
    app = create_retrieval_app(sources, settings)
    with BackgroundServer(app) as server:
        latencies, wall, errors = asyncio.run(_burst(server.url, bodies))
    latencies.sort()
    return {
        "scenario": label,
        "requests": len(latencies),
        "q/req": 1,
        "p50_ms": statistics.median(latencies),
        "p95_ms": latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))],
        "max_ms": latencies[-1],
        "req/s": len(latencies) / wall,
        "queries/s": len(latencies) / wall,
        "errors": errors,
        "merged calls": f"{app.state.runner.batcher.batches} ({app.state.runner.batcher.merged_requests} req)",
    }


def searchr1_batch(sources: SourceSet, args: argparse.Namespace, queries: list[str]) -> dict:
    """One POST /retrieve/searchr1 with ``args.searchr1`` queries (topk 3, scores), as Search-R1's
    rollout sends every active rollout's query at once; the source is ``args.source``."""
    from routerag.server.settings import SearchR1Settings

    batch = [queries[i % len(queries)] for i in range(args.searchr1)]
    settings = ServerSettings(retrieval_threads=args.threads, searchr1=SearchR1Settings(default_source=args.source))
    with BackgroundServer(create_retrieval_app(sources, settings)) as server, \
            httpx.Client(base_url=server.url, timeout=600) as client:
        body = {"queries": batch, "topk": 3, "return_scores": True}
        return measure(f"Search-R1, {args.searchr1} queries in one request", [
            (lambda: len(client.post("/retrieve/searchr1", json=body).raise_for_status().json()["result"]))
            for _ in range(3)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, help="an existing index directory (default: build one)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS)
    parser.add_argument("--docs", type=int, default=1000, help="passages in the built index")
    parser.add_argument("--components", default="bm25", help="components of the built index (bm25 or dense,bm25)")
    parser.add_argument("--source", default="bm25", help="the source to query")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--requests", type=int, default=200, help="requests per scenario (bounded)")
    parser.add_argument("--burst", type=int, default=0, help="also send this many single-query requests at once")
    parser.add_argument("--only-burst", action="store_true", help="run only the burst (and --searchr1) scenarios")
    parser.add_argument("--searchr1", type=int, default=0,
                        help="also send one Search-R1 request with this many queries (a trainer's batch), 3 times")
    parser.add_argument("--threads", type=int, default=4, help="ServerSettings.retrieval_threads")
    parser.add_argument("--torch-threads", type=int, help="torch intra-op threads (default: torch's own)")
    args = parser.parse_args()
    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)

    sources = load_sources(args.index, args.corpus, args.docs, args.components.split(","))
    queries = load_queries(args.questions, max(args.requests, 32))
    n = args.requests

    def req(batch: list[str]) -> dict:
        return {"queries": batch, "k": args.k, "sources": [args.source]}

    rows = []
    sources.retrieve(RetrievalRequest(**req(queries[:8])))  # warm caches / models
    if args.burst:
        bodies = [req([queries[i % len(queries)]]) for i in range(args.burst)]
        for batching in (False, True):
            settings = ServerSettings(retrieval_threads=args.threads, micro_batching=batching)
            label = f"HTTP, burst of {args.burst}, micro-batching {'on' if batching else 'off'}"
            rows.append(burst(label, sources, settings, bodies))
    if args.searchr1:
        rows.append(searchr1_batch(sources, args, queries))
    if args.only_burst:
        print_rows(args, rows)
        return
    rows.append(measure("in-process, 1 query", [
        (lambda q=q: len(sources.retrieve(RetrievalRequest(**req([q]))).results[args.source])) for q in queries[:n]]))

    with BackgroundServer(create_retrieval_app(sources, ServerSettings(retrieval_threads=args.threads))) as server, \
            httpx.Client(base_url=server.url, timeout=60) as client:

        def post(batch: list[str], c: httpx.Client = client) -> int:
            r = c.post("/retrieve", json=req(batch))
            r.raise_for_status()
            return len(r.json()["results"][args.source])

        post(queries[:8])
        rows.append(measure("HTTP, 1 query/request", [(lambda q=q: post([q])) for q in queries[:n]]))
        for size in (8, 32):
            batches = [[queries[(i * size + j) % len(queries)] for j in range(size)] for i in range(max(n // 4, 1))]
            rows.append(measure(f"HTTP, batch of {size}", [(lambda b=b: post(b)) for b in batches]))
        # httpx.Client is thread-safe: 4 threads share its connection pool
        rows.append(measure("HTTP, 4 threads, 1 query", [(lambda q=q: post([q])) for q in queries[:n]], workers=4))
    print_rows(args, rows)


def print_rows(args: argparse.Namespace, rows: list[dict]) -> None:
    print(f"source={args.source} k={args.k} requests/scenario<={args.requests} retrieval_threads={args.threads}")
    header = ["scenario", "requests", "q/req", "p50_ms", "p95_ms", "req/s", "queries/s"]
    if any("merged calls" in row for row in rows):
        header += ["max_ms", "errors", "merged calls"]
        rows = [{"max_ms": "", "errors": "", "merged calls": "", **row} for row in rows]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        cells = [f"{row[h]:.2f}" if isinstance(row[h], float) else str(row[h]) for h in header]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
