"""BM25 at scale: bm25s memory and build/query time at millions of passages, and the memory-mapped load.

    nice -n 19 python3 benchmarks/bench_bm25_scale.py --n 1000000
    nice -n 19 python3 benchmarks/bench_bm25_scale.py --n 1000000,3000000 --queries 200

Passages: synthetic, resampled from real text: every sentence of the shared corpora's passages
(2Wiki, HotpotQA-train100, MuSiQue-train100) goes into a pool, and passage ``i`` is 3-6 sentences
drawn with replacement (seeded) from it: real vocabulary and sentence lengths, ~80-100 words per
passage like wiki-18's 100-word passages, but no topical coherence within a passage. Queries: the
real 2Wiki questions.

Each N runs in fresh processes:

* **build**: tokenise with routerag's ``BM25Tokenizer`` (bm25s, stopwords, Snowball stemming) and
  index with ``bm25s.BM25`` (as ``BM25Index._fit``), save with ``BM25Index._save_arrays``; reports
  the phase times and ``RssAnon``/``VmHWM`` after each phase (the passages' text itself is part of
  the resident memory: it is reported after generation).
* **load** (twice: ``mmap=False`` as routerag loaded before, ``mmap=True``): ``bm25s.BM25.load``
  with ``allow_pickle=False`` plus routerag's consistency checks (``_shape_problem``), then the
  same search code as ``BM25Index.search``; reports load time, ``RssAnon`` after load and after the
  queries, per-query p50/p95 (one query per call). Prints markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

GIB = 1024**3

_COMMON = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    import numpy as np

    def mem():
        out = {}
        for line in open("/proc/self/status"):
            key = line.split(":")[0]
            if key in ("RssAnon", "VmHWM", "RssFile"):
                out[key] = int(line.split()[1]) * 1024
        return out
    """
)

_BUILD = _COMMON + textwrap.dedent(
    """
    pool_file, n, seed, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    from routerag.index.bm25 import BM25Index, BM25Tokenizer
    from routerag.index.settings import BM25Settings
    import bm25s
    settings = BM25Settings()
    report = {"start": mem()}
    pool = json.loads(Path(pool_file).read_text())
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    counts = rng.integers(3, 7, size=n)
    picks = rng.integers(0, len(pool), size=int(counts.sum()))
    texts, at = [], 0
    for c in counts.tolist():
        texts.append(" ".join(pool[j] for j in picks[at:at + c].tolist()))
        at += c
    del picks
    report["generate_s"] = time.perf_counter() - t0
    report["words_per_passage"] = float(np.mean([len(t.split()) for t in texts[:10000]]))
    report["after_generate"] = mem()
    t0 = time.perf_counter()
    tokens = BM25Tokenizer(settings)(texts)
    report["tokenize_s"] = time.perf_counter() - t0
    report["after_tokenize"] = mem()
    del texts
    t0 = time.perf_counter()
    retriever = bm25s.BM25(k1=settings.k1, b=settings.b, method=settings.method)
    retriever.index(tokens, show_progress=False)
    report["index_s"] = time.perf_counter() - t0
    report["after_index"] = mem()
    del tokens
    report["after_free_tokens"] = mem()
    t0 = time.perf_counter()
    BM25Index._save_arrays(retriever, out)
    report["save_s"] = time.perf_counter() - t0
    report["nnz"] = int(len(retriever.scores["data"]))
    report["vocab"] = len(retriever.vocab_dict)
    report["end"] = mem()
    print(json.dumps(report))
    """
)

_LOAD = _COMMON + textwrap.dedent(
    """
    directory, mmap, queries_file, timed = Path(sys.argv[1]), sys.argv[2] == "1", sys.argv[3], int(sys.argv[4])
    import bm25s
    from routerag.index.bm25 import ARRAYS_DIR, BM25Index, _shape_problem
    from routerag.index.settings import IndexSettings
    queries = json.loads(Path(queries_file).read_text())[:timed]
    report = {"before": mem()}
    t0 = time.perf_counter()
    retriever = bm25s.BM25.load(str(directory / ARRAYS_DIR), load_corpus=False, mmap=mmap, allow_pickle=False)
    report["load_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    problem = _shape_problem(retriever)
    report["check_s"] = time.perf_counter() - t0
    assert problem is None, problem
    report["after_load"] = mem()
    index = BM25Index(None, IndexSettings(), retriever, None)  # the search path only
    lat, hits = [], []
    for q in queries:
        t = time.perf_counter()
        scores, rows = index.search([q], 10)[0]
        lat.append((time.perf_counter() - t) * 1000)
        hits.append(rows.tolist())
    report["p50_ms"] = float(np.percentile(lat, 50))
    report["p95_ms"] = float(np.percentile(lat, 95))
    report["hits"] = hits
    report["after_search"] = mem()
    print(json.dumps(report))
    """
)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def sentence_pool() -> list[str]:
    from routerag.corpus.datasets import data_root
    from routerag.corpus.loaders import load_corpus

    root = data_root()
    files = [
        root / "2wikimultihopqa" / "2wikimultihopqa_corpus.json",
        root / "hotpotqa_train100" / "hotpotqa_train_corpus.json",
        root / "musique_train100" / "musique_train_corpus.json",
    ]
    pool: list[str] = []
    for path in files:
        if not path.is_file():
            continue
        for doc in load_corpus(path).docs:
            for sentence in re.split(r"(?<=[.!?])\s+", doc.text):
                if len(sentence.split()) >= 4:
                    pool.append(sentence.strip())
    return pool


def run(script: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"child failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", default="1000000", help="comma-separated passage counts")
    parser.add_argument("--queries", type=int, default=200, help="real 2Wiki questions timed one by one")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None, help="default: <routerag cache>/bench_bm25_scale")
    parser.add_argument("--keep", action="store_true", help="keep the saved BM25 arrays")
    args = parser.parse_args()

    from routerag.corpus.datasets import data_root
    from routerag.paths import cache_dir

    workdir = args.workdir or cache_dir("bench_bm25_scale")
    workdir.mkdir(parents=True, exist_ok=True)
    pool = sentence_pool()
    (workdir / "pool.json").write_text(json.dumps(pool))
    questions = [json.loads(line)["question"] for line in (data_root() / "2wikimultihopqa" / "2wikimultihopqa_questions.jsonl").open()]
    (workdir / "queries.json").write_text(json.dumps(questions))
    log(f"sentence pool: {len(pool):,} real sentences")

    rows = []
    for n in (int(x) for x in args.n.split(",")):
        out = workdir / str(n)
        out.mkdir(exist_ok=True)
        log(f"building BM25 over {n:,} passages")
        build = run(_BUILD, str(workdir / "pool.json"), str(n), str(args.seed), str(out))
        size = sum(p.stat().st_size for p in (out / "bm25s").iterdir())
        loads = {}
        for mmap in (False, True):
            log(f"loading (mmap={mmap}) and querying")
            loads[mmap] = run(_LOAD, str(out), "1" if mmap else "0", str(workdir / "queries.json"), str(args.queries))
        same = loads[False]["hits"] == loads[True]["hits"]
        rows.append((n, build, size, loads, same))
        if not args.keep:
            for path in (out / "bm25s").iterdir():
                path.unlink()

    print(f"\n## BM25 (bm25s {__import__('bm25s').__version__}) at scale: synthetic passages resampled from {len(pool):,} real sentences\n")
    print(
        "| passages | words/passage | vocab | nnz | generate (s) | tokenize (s) | index (s) | save (s) | arrays on disk (GiB) "
        "| RssAnon: texts / +tokens / +index / after freeing tokens (GiB) | peak RSS (GiB) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n, b, size, _, _ in rows:
        ra = [b[k]["RssAnon"] / GIB for k in ("after_generate", "after_tokenize", "after_index", "after_free_tokens")]
        print(
            f"| {n:,} | {b['words_per_passage']:.0f} | {b['vocab']:,} | {b['nnz']:,} | {b['generate_s']:.0f} | {b['tokenize_s']:.0f} | "
            f"{b['index_s']:.0f} | {b['save_s']:.1f} | {size / GIB:.2f} | {' / '.join(f'{x:.2f}' for x in ra)} | {b['end']['VmHWM'] / GIB:.2f} |"
        )
    print(
        f"\n| passages | load | load (s) | checks (s) | RssAnon after load (GiB) | RssAnon after {args.queries} queries (GiB) "
        "| p50 / p95 per query (ms) | same top 10 as mmap=False |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for n, _, _, loads, same in rows:
        for mmap, r in loads.items():
            print(
                f"| {n:,} | mmap={mmap} | {r['load_s']:.2f} | {r['check_s']:.2f} | {r['after_load']['RssAnon'] / GIB:.3f} | "
                f"{r['after_search']['RssAnon'] / GIB:.3f} | {r['p50_ms']:.1f} / {r['p95_ms']:.1f} | {'yes' if same else 'NO'} |"
            )
    print(
        "\nRssAnon before loading (interpreter, numpy, bm25s, routerag): "
        + ", ".join(f"{r[3][False]['before']['RssAnon'] / GIB:.3f} GiB" for r in rows[:1])
    )


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
