"""A busy ask service: health under a queue, admission (429), memory of cancelled runs, half-open
connections. The service runs in a child process (its RSS is its own; the client's load does not
share its interpreter) over no sources, answering with ``direct`` on the project's scripted model
(``routerag.llm.scripted``) that sleeps ``--model-ms`` per call to stand for model work (a sleep
releases the GIL, as a real backend's HTTP call or llama.cpp's C code does).

Prints markdown tables (docs/experiments/2026-11-29-service-under-load.md):

a. ``/health`` latency (fresh connection per probe, every 20 ms) while ``--asks`` asks are queued
   (the asks bound set above them), against the target p95 <= 100 ms;
b. asks over the bound: how many get 200 and 429 (with ``Retry-After``), and what ``/ready`` says
   before and after;
c. RSS of the service before, after queueing ``--runs`` runs of ``--run-questions`` questions
   (one worker, blocked in its first answer) and after cancelling them;
d. ``--half-open`` connections that send part of their headers: how many the server has closed
   ``header_timeout_s`` + 1 s later, with the header timeout and with plain uvicorn settings.

    python3 benchmarks/bench_service_admission.py                      # all four parts
    python3 benchmarks/bench_service_admission.py --parts health --asks 1000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import select
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ASK = {"question": "Who was Teutberga married to?", "strategy": "direct"}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def table(cols: list[str], rows: list[list[Any]]) -> None:
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(cols))) + "|")
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")
    print()


# ---------------------------------------------------------------- the service, in a child process


def _serve(settings: dict[str, Any], model_ms: float, guarded: bool, ready: Any) -> None:
    import tempfile

    import uvicorn

    from routerag.edge.serving import bind_socket
    from routerag.llm.scripted import ScriptedModel
    from routerag.server.app import create_app
    from routerag.server.settings import ServiceSettings
    from routerag.sources.sourceset import SourceSet

    def respond(messages, params, continue_final) -> str:
        time.sleep(model_ms / 1000.0)
        return "Lothair II"

    with tempfile.TemporaryDirectory(prefix="bench-admission-") as tmp:
        service = ServiceSettings.model_validate({**settings, "data_dir": tmp, "ui": False})
        app = create_app(ScriptedModel(respond), SourceSet(), service)
        sock = bind_socket()
        options: dict[str, Any] = {}
        if guarded:
            from routerag.edge.connections import uvicorn_options

            options = uvicorn_options(service.security)
        config = uvicorn.Config(app, log_level="error", access_log=False, lifespan="on", **options)
        ready.put(sock.getsockname()[1])
        uvicorn.Server(config).run(sockets=[sock])


class Service:
    def __init__(self, settings: dict[str, Any], model_ms: float, guarded: bool = True) -> None:
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        self.process = ctx.Process(target=_serve, args=(settings, model_ms, guarded, queue), daemon=True)
        self.process.start()
        self.port = queue.get(timeout=120)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(self.url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("the service did not start")
            time.sleep(0.1)

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")

    def stop(self) -> None:
        self.process.terminate()
        self.process.join(10)
        if self.process.is_alive():  # uvicorn waits for open connections on SIGTERM
            self.process.kill()
            self.process.join()

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def health_once(port: int) -> float | None:
    """One ``GET /health`` on a fresh connection (connect, send, read to the end): ms, None if not 200."""
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return (time.perf_counter() - t0) * 1000 if reply.startswith(b"HTTP/1.1 200") else None


def _probe(port: int, seconds: float, every_s: float, out: Any) -> None:
    samples = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ms = health_once(port)
        if ms is not None:
            samples.append(ms)
        time.sleep(every_s)
    out.put(samples)


def probe_health(port: int, seconds: float, every_s: float = 0.02) -> tuple[Any, Any]:
    """Probe ``/health`` from a process of its own (the asks' client does not share its interpreter)
    for ``seconds``; returns (process, queue): ``queue.get()`` gives the latencies in ms."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    process = ctx.Process(target=_probe, args=(port, seconds, every_s, out), daemon=True)
    process.start()
    return process, out


async def send_asks(url: str, n: int) -> list[int]:
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:
        async def one() -> int:
            try:
                return (await client.post("/v1/ask", json=ASK)).status_code
            except httpx.HTTPError:
                return 0
        return list(await asyncio.gather(*(one() for _ in range(n))))


# ---------------------------------------------------------------- a. /health under a queue


def part_health(args: argparse.Namespace) -> None:
    settings: dict[str, Any] = {"ask_threads": args.ask_threads}
    if not args.before:
        settings["admission"] = {"max_asks": args.asks + 100}
    with Service(settings, args.model_ms, guarded=not args.before) as service:
        process, out = probe_health(service.port, 3.0)
        idle = out.get(timeout=120)
        process.join()
        # probed while the asks are sent and queued: the first 3/4 of the time they take to answer
        busy_s = 0.75 * args.asks / args.ask_threads * args.model_ms / 1000
        process, out = probe_health(service.port, busy_s)
        t0 = time.perf_counter()
        codes = asyncio.run(send_asks(service.url, args.asks))
        wall = time.perf_counter() - t0
        busy = out.get(timeout=600)
        process.join()
    print(f"### a. /health while {args.asks} asks are queued{' (before: code without the change)' if args.before else ''} ({args.ask_threads} ask threads, model {args.model_ms:g} ms a call; "
          f"the asks took {wall:.1f} s, {codes.count(200)} answered 200)\n")
    rows = []
    for name, samples in (("idle", idle), (f"{args.asks} asks queued", busy)):
        rows.append([name, len(samples), f"{statistics.median(samples):.1f}", f"{percentile(samples, 0.95):.1f}",
                     f"{max(samples):.1f}", "yes" if percentile(samples, 0.95) <= 100 else "NO"])
    table(["/health", "probes", "p50 ms", "p95 ms", "max ms", "p95 <= 100 ms"], rows)


# ---------------------------------------------------------------- b. over the bound


def part_bound(args: argparse.Namespace) -> None:
    settings = {"ask_threads": args.ask_threads, "admission": {"max_asks": args.bound, "retry_after_s": 2}}
    with Service(settings, args.model_ms) as service:
        ready_idle = httpx.get(service.url + "/ready", timeout=30).status_code
        statuses: list[tuple[int, str | None, int]] = []

        async def burst() -> None:
            limits = httpx.Limits(max_connections=args.burst, max_keepalive_connections=args.burst)
            async with httpx.AsyncClient(base_url=service.url, timeout=600, limits=limits) as client:
                async def one() -> None:
                    r = await client.post("/v1/ask", json=ASK)
                    statuses.append((r.status_code, r.headers.get("retry-after"),
                                     r.json().get("in_use", -1) if r.status_code == 429 else -1))

                async def ready_while() -> int:
                    await asyncio.sleep(0.5)
                    return (await client.get("/ready")).status_code

                results = await asyncio.gather(ready_while(), *(one() for _ in range(args.burst)))
                holder.append(results[0])

        holder: list[int] = []
        asyncio.run(burst())
        time.sleep(0.2)
        after = httpx.get(service.url + "/ready", timeout=30).json()
    codes = [s[0] for s in statuses]
    print(f"### b. {args.burst} asks at once, bound admission.max_asks={args.bound} "
          f"({args.ask_threads} ask threads, model {args.model_ms:g} ms a call)\n")
    table(["asks sent", "200", "429", "other", "429 with Retry-After", "/ready idle", "/ready during", "/ready after",
           "asks in use after"],
          [[len(codes), codes.count(200), codes.count(429), len(codes) - codes.count(200) - codes.count(429),
            sum(1 for s in statuses if s[0] == 429 and s[1]), ready_idle, holder[0], 200 if after["ready"] else 503,
            after["admission"][0]["in_use"]]])


# ---------------------------------------------------------------- c. memory of cancelled runs


def part_memory(args: argparse.Namespace) -> None:
    settings: dict[str, Any] = {"run_workers": 1, "max_run_questions": args.run_questions}
    if not args.before:
        settings["admission"] = {"max_run_answers": args.runs * args.run_questions + 1}
    questions = [{"question": f"Question number {i} about a moderately long topic?", "qid": f"q{i}",
                  "answers": [f"answer {i}"]} for i in range(args.run_questions)]
    body = json.dumps({"questions": questions, "strategy": "direct"})
    with Service(settings, 600_000.0, guarded=not args.before) as service, httpx.Client(base_url=service.url, timeout=600) as c:
        time.sleep(1.0)
        blocker = c.post("/v1/runs", json={"questions": [{"question": "The answer the worker is blocked in?"}],
                                           "strategy": "direct"})
        assert blocker.status_code == 202, blocker.text
        time.sleep(1.0)
        before = service.rss_mb()
        ids = []
        for _ in range(args.runs):
            r = c.post("/v1/runs", content=body, headers={"content-type": "application/json"})
            assert r.status_code == 202, r.text
            ids.append(r.json()["run_id"])
        time.sleep(1.0)
        queued = service.rss_mb()
        t0 = time.perf_counter()
        for run_id in ids:
            assert c.delete(f"/v1/runs/{run_id}").status_code == 200
        cancel_s = time.perf_counter() - t0
        time.sleep(2.0)
        after = service.rss_mb()
        states = [c.get(f"/v1/runs/{run_id}").json()["state"] for run_id in ids]
    print(f"### c. RSS of the service: {args.runs} runs x {args.run_questions} questions queued behind a run whose "
          f"one answer blocks the worker, then cancelled{' (before: code without the change)' if args.before else ''}\n")
    table(["RSS before MB", "queued MB", "after cancel MB", "after - before", "within 10 %", "cancel all s",
           "states after"],
          [[f"{before:.0f}", f"{queued:.0f}", f"{after:.0f}", f"{after - before:+.0f} ({(after - before) / before:+.0%})",
            "yes" if after <= before * 1.10 else "NO", f"{cancel_s:.2f}",
            ", ".join(f"{s} {states.count(s)}" for s in sorted(set(states)))]])


# ---------------------------------------------------------------- d. half-open connections


def count_closed(socks: list[socket.socket]) -> int:
    closed = 0
    for sock in socks:
        readable, _, _ = select.select([sock], [], [], 0)
        if readable:
            try:
                if sock.recv(4096) == b"":
                    closed += 1
            except OSError:
                closed += 1
    return closed


def part_half_open(args: argparse.Namespace) -> None:
    rows = []
    for guarded in (False, True):
        settings = {"security": {"header_timeout_s": args.header_timeout}}
        with Service(settings, 10.0, guarded=guarded) as service:
            socks = []
            for _ in range(args.half_open):
                sock = socket.create_connection(("127.0.0.1", service.port), timeout=10)
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                socks.append(sock)
            time.sleep(args.header_timeout + 1.0)
            closed = count_closed(socks)
            health = httpx.get(service.url + "/health", timeout=30).status_code
            for sock in socks:
                sock.close()
        label = f"header_timeout_s={args.header_timeout:g}" if guarded else "plain uvicorn (no header timeout)"
        rows.append([label, args.half_open, closed, args.half_open - closed, health])
    print(f"### d. {args.half_open} connections that send part of their headers, counted {args.header_timeout + 1:g} s later\n")
    table(["server", "opened", "closed by the server", "still open", "/health after"], rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="health,bound,memory,half-open")
    parser.add_argument("--asks", type=int, default=1000, help="a. asks queued")
    parser.add_argument("--ask-threads", type=int, default=4)
    parser.add_argument("--model-ms", type=float, default=100.0, help="a./b. the scripted model's sleep per call")
    parser.add_argument("--bound", type=int, default=64, help="b. admission.max_asks")
    parser.add_argument("--burst", type=int, default=200, help="b. asks sent at once")
    parser.add_argument("--runs", type=int, default=40, help="c. runs queued")
    parser.add_argument("--run-questions", type=int, default=5000, help="c. questions per run")
    parser.add_argument("--before", action="store_true",
                        help="a./c. settings the code before admission control takes (run with PYTHONPATH at that code)")
    parser.add_argument("--half-open", type=int, default=300, help="d. connections")
    parser.add_argument("--header-timeout", type=float, default=2.0, help="d. security.header_timeout_s")
    args = parser.parse_args(argv)
    parts = {p.strip() for p in args.parts.split(",")}
    print(f"(python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})\n")
    for name, part in (("health", part_health), ("bound", part_bound), ("memory", part_memory), ("half-open", part_half_open)):
        if name in parts:
            part(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
