"""The document stores at scale: the memory-mapped Arrow store vs the JSONL store.

    nice -n 19 python3 benchmarks/bench_docstore.py --n 1000000

Documents: synthetic, 3-6 real sentences resampled from the shared corpora (as
``bench_bm25_scale.py``), with a title and a small metadata dict, written straight from a
generator (never all in memory) as ``docs.arrow`` (``write_arrow``) and ``docs.jsonl`` (one
``model_dump_json`` line each, the JSONL store's format). Each store is then opened in a fresh
process that reports ``RssAnon`` before/after opening, the open time, and the latency of fetching
10 random rows (``store.at``), 200 times. Prints markdown.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ann import PROBE_PRELUDE, log  # noqa: E402
from bench_bm25_scale import sentence_pool  # noqa: E402

GIB = 1024**3

_PROBE = PROBE_PRELUDE + textwrap.dedent(
    """
    directory, kind = Path(sys.argv[1]), sys.argv[2]
    from routerag.index.docstore import DocStore
    if kind == "arrow":
        import pyarrow
        from routerag.index.arrow_docstore import ArrowDocStore
    before = rss_anon()
    t0 = time.perf_counter()
    store = ArrowDocStore.open(directory) if kind == "arrow" else DocStore.load(directory)
    open_s = time.perf_counter() - t0
    after = rss_anon()
    rng = np.random.default_rng(0)
    lat = []
    for _ in range(200):
        rows = rng.integers(0, len(store), size=10).tolist()
        t = time.perf_counter()
        docs = store.at(rows)
        lat.append((time.perf_counter() - t) * 1000)
    print(json.dumps({"n": len(store), "open_s": open_s, "before": before, "after_open": after,
                      "after_fetch": rss_anon(), "p50_ms": float(np.percentile(lat, 50)),
                      "p95_ms": float(np.percentile(lat, 95)), "hash": store.corpus_hash()}))
    """
)



def documents(pool: list[str], n: int, seed: int):
    from routerag.corpus.schema import Document

    rng = np.random.default_rng(seed)
    for i in range(n):
        picks = rng.integers(0, len(pool), size=int(rng.integers(3, 7)))
        text = " ".join(pool[j] for j in picks.tolist())
        yield Document.make(f"Synthetic {i}", text, metadata={"i": i})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None, help="default: <routerag cache>/bench_docstore/<n>")
    args = parser.parse_args()

    from routerag.index.arrow_docstore import write_arrow
    from routerag.index.docstore import ARROW_NAME, DOCS_NAME
    from routerag.paths import cache_dir

    workdir = args.workdir or cache_dir("bench_docstore") / str(args.n)
    (workdir / "arrow").mkdir(parents=True, exist_ok=True)
    (workdir / "jsonl").mkdir(parents=True, exist_ok=True)
    pool = sentence_pool()
    log(f"writing {args.n:,} documents as Arrow")
    t0 = time.perf_counter()
    write_arrow(lambda: documents(pool, args.n, args.seed), workdir / "arrow" / ARROW_NAME)
    arrow_write = time.perf_counter() - t0
    log("writing them as JSONL")
    t0 = time.perf_counter()
    with (workdir / "jsonl" / DOCS_NAME).open("w", encoding="utf-8") as handle:
        for doc in documents(pool, args.n, args.seed):
            handle.write(doc.model_dump_json() + "\n")
    jsonl_write = time.perf_counter() - t0
    results = {}
    for kind in ("arrow", "jsonl"):
        log(f"opening the {kind} store in a fresh process")
        done = subprocess.run([sys.executable, "-c", _PROBE, str(workdir / kind), kind], capture_output=True, text=True, check=False)
        if done.returncode:
            raise SystemExit(done.stderr[-3000:])
        results[kind] = json.loads(done.stdout.strip().splitlines()[-1])
    assert results["arrow"]["hash"] == results["jsonl"]["hash"], "the stores hold different documents"
    sizes = {"arrow": (workdir / "arrow" / ARROW_NAME).stat().st_size, "jsonl": (workdir / "jsonl" / DOCS_NAME).stat().st_size}
    writes = {"arrow": arrow_write, "jsonl": jsonl_write}
    print(f"\n## Document stores at {args.n:,} documents (same documents, same corpus hash)\n")
    print("| store | file (GiB) | write (s) | open (s) | RssAnon after open (GiB) | fetch 10 random rows p50 / p95 (ms) |")
    print("|---|---|---|---|---|---|")
    for kind, r in results.items():
        print(
            f"| {kind} | {sizes[kind] / GIB:.2f} | {writes[kind]:.0f} | {r['open_s']:.2f} | {r['after_open'] / GIB:.3f} | "
            f"{r['p50_ms']:.2f} / {r['p95_ms']:.2f} |"
        )
    print(
        f"\nRssAnon before opening: arrow {results['arrow']['before'] / GIB:.3f} GiB (with pyarrow imported), "
        f"jsonl {results['jsonl']['before'] / GIB:.3f} GiB."
    )
    for kind in ("arrow", "jsonl"):
        for path in (workdir / kind).iterdir():
            path.unlink()


if __name__ == "__main__":
    main()
