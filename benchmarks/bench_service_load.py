"""Load on the ask service: N concurrent ``POST /v1/ask`` (or ``/v1/ask/stream``) requests
against one real uvicorn server on loopback, with a scripted model double that takes
``--model-ms`` per call, over a real BM25 index of 2WikiMultihopQA passages.

    python3 benchmarks/bench_service_load.py                       # 50 concurrent asks
    python3 benchmarks/bench_service_load.py --n 200 --ask-threads 8 --stream

Reports p50/p95/max client latency, throughput, HTTP errors, and checks that no request is lost:
every request carries a unique qid and must come back with that qid and the expected answer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from routerag.corpus.datasets import data_root
from routerag.sources.registry import bundle_sources

CORPUS = data_root() / "2wikimultihopqa" / "2wikimultihopqa_corpus.json"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def build_server(args: argparse.Namespace, workdir: Path):
    from routerag.corpus.schema import Document
    from routerag.edge.serving import BackgroundServer
    from routerag.index.bundle import build_index, load_index
    from routerag.llm.scripted import ScriptedModel
    from routerag.server.app import create_app
    from routerag.server.settings import ServiceSettings

    rows = json.loads(args.corpus.read_text(encoding="utf-8"))[: args.passages]
    bundle = build_index([Document.make(r["title"], r["text"]) for r in rows], workdir / "index", components=("bm25",))
    delay = args.model_ms / 1000.0

    def respond(messages, params, continue_final) -> str:
        time.sleep(delay)  # a model call's latency (sleep releases the GIL, like a real HTTP backend)
        return "Lothair II" if "Lothair II" in messages[0].content else "unknown"

    settings = ServiceSettings(ask_threads=args.ask_threads, data_dir=workdir / "data", ui=False)
    return BackgroundServer(create_app(ScriptedModel(respond), bundle_sources(load_index(bundle.directory)), settings))


async def one(client: httpx.AsyncClient, i: int, stream: bool) -> tuple[float, int, str | None, str | None]:
    body = {"question": "Who was Teutberga married to?", "qid": f"q{i}", "strategy": "vanilla",
            "params": {"source": "bm25", "k": 3}}
    t0 = time.perf_counter()
    try:
        if stream:
            trace = None
            async with client.stream("POST", "/v1/ask/stream", json=body) as r:
                status = r.status_code
                event = None
                async for line in r.aiter_lines():
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: ") and event == "trace":
                        trace = json.loads(line[6:])
        else:
            r = await client.post("/v1/ask", json=body)
            status = r.status_code
            trace = r.json() if status == 200 else None
    except httpx.HTTPError as exc:
        return (time.perf_counter() - t0) * 1000, 0, None, f"{type(exc).__name__}: {exc}"
    ms = (time.perf_counter() - t0) * 1000
    if trace is None:
        return ms, status, None, f"HTTP {status}"
    return ms, status, trace.get("qid"), trace.get("answer")


async def load(url: str, n: int, stream: bool) -> tuple[list[tuple[float, int, str | None, str | None]], float]:
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        await one(client, -1, stream)  # warm-up (first retrieval loads nothing lazily twice)
        t0 = time.perf_counter()
        results = await asyncio.gather(*(one(client, i, stream) for i in range(n)))
        return list(results), time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=50, help="concurrent requests")
    parser.add_argument("--model-ms", type=float, default=20.0, help="latency of each scripted model call")
    parser.add_argument("--ask-threads", type=int, default=4, help="ServiceSettings.ask_threads")
    parser.add_argument("--passages", type=int, default=1000, help="passages in the BM25 index")
    parser.add_argument("--stream", action="store_true", help="use /v1/ask/stream (SSE) instead of /v1/ask")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, build_server(args, Path(tmp)) as server:
        results, wall = asyncio.run(load(server.url, args.n, args.stream))
    latencies = [r[0] for r in results]
    errors = [r for r in results if r[1] != 200]
    lost = [i for i, r in enumerate(results) if r[1] == 200 and r[2] != f"q{i}"]
    wrong = [i for i, r in enumerate(results) if r[1] == 200 and r[3] != "Lothair II"]
    report = {
        "endpoint": "/v1/ask/stream" if args.stream else "/v1/ask",
        "requests": args.n, "ask_threads": args.ask_threads, "model_ms": args.model_ms, "passages": args.passages,
        "p50_ms": round(statistics.median(latencies), 1), "p95_ms": round(percentile(latencies, 0.95), 1),
        "max_ms": round(max(latencies), 1), "wall_s": round(wall, 3), "throughput_rps": round(args.n / wall, 1),
        "errors": len(errors), "lost": len(lost), "wrong_answers": len(wrong),
        "error_samples": [r[3] for r in errors[:3]],
    }
    print(json.dumps(report, indent=1))
    return 0 if not errors and not lost and not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
