"""ANN fidelity and memory: the ``ivfpq`` dense index vs ``flat`` at N x 384 vectors.

    nice -n 10 python3 benchmarks/bench_ann.py                       # 1M vectors, 1 thread
    nice -n 10 python3 benchmarks/bench_ann.py --n 200000 --nprobe 16,32,64 --rescore 0,100

Vectors: N synthetic vectors drawn from a model fitted to the real MiniLM embeddings (the
bundled embedder) of the 6,119 2WikiMultihopQA passages, then L2-normalised as real embeddings
are: by default a mixture of 256 Gaussians at the k-means centres of the real passages sharing
their pooled within-cluster covariance (``--model tied-gmm``); ``--model gaussian`` draws from one
Gaussian with the passages' mean and covariance (no cluster structure: the hard case for IVF). Queries: the 1,000 real 2Wiki questions, embedded with the
same embedder. Truth: exact top 10 by ``IndexFlatIP`` over the same float32 vectors.

Each index is loaded and searched in a fresh Python process (numpy + faiss only), which reports
its anonymous RSS (``RssAnon`` of ``/proc/self/status``) before and after the load, the load
time, and the per-query search latency (one query per call, ``--timed`` queries). The files were
just written, so the page cache is warm: latencies are warm-cache numbers. Prints markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

TARGETS = {"recall": 0.95, "rss_gb": 0.3, "p50_ms": 5.0, "load_s": 1.0}

# what every memory probe subprocess starts with (bench_ann_21m.py and bench_docstore.py use it too)
PROBE_PRELUDE = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    import numpy as np

    def status_bytes(field):
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024

    def rss_anon():
        return status_bytes("RssAnon")
    """
)

_PROBE = PROBE_PRELUDE + textwrap.dedent(
    """
    kind, directory, threads, timed = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    configs = json.loads(sys.argv[5])
    import faiss
    faiss.omp_set_num_threads(threads)
    queries = np.load(directory / "queries.npy")
    from routerag.index.ivfpq import IVFPQIndex  # imports are not the index: measured before the load
    from routerag.index.settings import IVFPQSettings
    before = rss_anon()
    t0 = time.perf_counter()
    if kind == "flat":
        index = faiss.read_index(str(directory / "flat.index"))
    else:
        index = IVFPQIndex.load(directory / "ivfpq", IVFPQSettings.model_validate(configs[0]))
    load_s = time.perf_counter() - t0
    after = rss_anon()
    out = {"load_s": load_s, "rss_before": before, "rss_after_load": after, "runs": []}
    for config in configs:
        if kind != "flat":
            index = IVFPQIndex(index.index, index.vectors16, IVFPQSettings.model_validate(config))
        if kind != "flat":  # the parent already holds flat's exact top 10
            _, rows = index.search(queries, 10)
            np.save(directory / f"rows-{kind}-{len(out['runs'])}.npy", rows)
        lat = []
        for q in queries[:timed]:
            t = time.perf_counter()
            index.search(q[None, :], 10)
            lat.append((time.perf_counter() - t) * 1000)
        out["runs"].append({"config": config, "p50_ms": float(np.percentile(lat, 50)),
                            "p95_ms": float(np.percentile(lat, 95))})
    out["rss_after_search"] = rss_anon()
    print(json.dumps(out))
    """
)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def real_embeddings(workdir: Path) -> dict[str, np.ndarray]:
    """The MiniLM embeddings of the 2Wiki passages (``passages``, float32, corpus order) and
    questions (``queries``), and the passages' ``mean`` and ``cov``; cached in ``workdir/real.npz``."""
    cache = workdir / "real.npz"
    if cache.is_file():
        with np.load(cache) as data:
            return dict(data)
    import torch

    from routerag.corpus.datasets import data_root
    from routerag.corpus.loaders import load_corpus
    from routerag.index.embedder import build_embedder

    torch.set_num_threads(1)
    folder = data_root() / "2wikimultihopqa"
    docs = load_corpus(folder / "2wikimultihopqa_corpus.json").docs
    questions = [json.loads(line)["question"] for line in (folder / "2wikimultihopqa_questions.jsonl").open()]
    embedder = build_embedder()
    log(f"embedding {len(docs)} 2Wiki passages and {len(questions)} questions (MiniLM, 1 thread)")
    passages = embedder.encode([d.passage for d in docs], is_query=False).astype(np.float32)
    queries = embedder.encode(questions, is_query=True).astype(np.float32)
    wide = passages.astype(np.float64)
    data = {"passages": passages, "queries": queries, "mean": wide.mean(axis=0), "cov": np.cov(wide, rowvar=False)}
    np.savez(cache, **data)
    return data


def fit_model(real: dict[str, np.ndarray], model: str, clusters: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(centres, weights, cov)`` of the generating model: ``gaussian`` = one Gaussian with the
    passages' mean and covariance (no cluster structure: the hard case for IVF); ``tied-gmm`` = a
    mixture of ``clusters`` Gaussians at the k-means centres of the real passages, weighted by
    cluster size, sharing the pooled within-cluster covariance (real embeddings are clustered)."""
    if model == "gaussian":
        return real["mean"][None, :], np.ones(1), real["cov"]
    import faiss

    passages = np.ascontiguousarray(real["passages"], dtype=np.float32)
    kmeans = faiss.Kmeans(passages.shape[1], clusters, niter=20, seed=seed, spherical=False)
    kmeans.train(passages)
    _, assign = kmeans.index.search(passages, 1)
    assign = assign[:, 0]
    centres = kmeans.centroids.astype(np.float64)
    residual = passages.astype(np.float64) - centres[assign]
    cov = residual.T @ residual / (len(passages) - clusters)
    weights = np.bincount(assign, minlength=clusters) / len(passages)
    return centres, weights, cov


def synthetic_shards(centres: np.ndarray, weights: np.ndarray, cov: np.ndarray, n: int, shard: int, seed: int):
    """``n`` normalised float32 draws from the mixture, ``shard`` rows at a time (seeded)."""
    factor = np.linalg.cholesky(cov + 1e-9 * np.eye(len(cov)))
    rng = np.random.default_rng(seed)
    for at in range(0, n, shard):
        rows = min(shard, n - at)
        component = rng.choice(len(weights), size=rows, p=weights)
        draw = centres[component] + rng.standard_normal((rows, cov.shape[0])) @ factor.T
        yield (draw / np.linalg.norm(draw, axis=1, keepdims=True)).astype(np.float32)


def probe(kind: str, workdir: Path, threads: int, timed: int, configs: list[dict]) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, kind, str(workdir), str(threads), str(timed), json.dumps(configs)],
        capture_output=True, text=True, env=env, check=False,
    )
    if done.returncode:
        raise SystemExit(f"{kind} probe failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def recall_at(rows: np.ndarray, truth: np.ndarray) -> float:
    k = truth.shape[1]
    return float(np.mean([len(set(r[:k].tolist()) & set(t.tolist())) / k for r, t in zip(rows, truth)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000, help="synthetic vectors")
    parser.add_argument("--nlist", type=int, default=1024)
    parser.add_argument("--m", type=int, default=48)
    parser.add_argument("--nbits", type=int, default=8)
    parser.add_argument("--opq", action="store_true")
    parser.add_argument("--train-size", type=int, default=50_000)
    parser.add_argument("--nprobe", default="16,32,64", help="comma-separated nprobe values to search with")
    parser.add_argument("--rescore", default="0,100", help="comma-separated re-scoring depths")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--timed", type=int, default=300, help="queries timed one by one per configuration")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", choices=["tied-gmm", "gaussian"], default="tied-gmm", help="how vectors are drawn")
    parser.add_argument("--clusters", type=int, default=256, help="mixture components of tied-gmm")
    parser.add_argument("--workdir", type=Path, default=None, help="default: <routerag cache>/bench_ann/<n>")
    parser.add_argument("--keep", action="store_true", help="keep the vector and index files")
    args = parser.parse_args()

    import faiss

    from routerag.index import ivfpq
    from routerag.index.settings import IVFPQSettings
    from routerag.paths import cache_dir

    faiss.omp_set_num_threads(args.threads)
    workdir = args.workdir or cache_dir("bench_ann") / str(args.n)
    workdir.mkdir(parents=True, exist_ok=True)
    nprobes = [int(x) for x in args.nprobe.split(",")]
    depths = [int(x) for x in args.rescore.split(",")]
    base = IVFPQSettings(
        nlist=args.nlist, m=args.m, nbits=args.nbits, opq=args.opq, nprobe=min(nprobes),
        train_size=args.train_size, seed=args.seed,
    )
    real = real_embeddings(workdir.parent)
    queries = real["queries"]
    centres, weights, cov = fit_model(real, args.model, args.clusters, args.seed)
    dim = cov.shape[0]
    np.save(workdir / "queries.npy", queries)

    log(f"drawing {args.n:,} x {dim} synthetic vectors; writing fp16 file and the flat index")
    flat = faiss.IndexFlatIP(dim)

    def shards():
        for shard in synthetic_shards(centres, weights, cov, args.n, 65_536, args.seed):
            flat.add(shard)
            yield shard

    (workdir / "ivfpq").mkdir(exist_ok=True)
    t0 = time.perf_counter()
    ivfpq.write_vectors(shards(), args.n, dim, workdir / "ivfpq" / ivfpq.VECTORS_NAME)
    synth_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    faiss.write_index(flat, str(workdir / "flat.index"))
    flat_build_s = time.perf_counter() - t0  # vectors are added while drawn; the write is the build
    log("exact top 10 of every question (flat)")
    _, truth = flat.search(queries, 10)
    flat.reset()  # free the float32 copy

    log(f"training IVF-PQ ({ivfpq.factory_string(dim, base)}) on {min(args.train_size, args.n):,} vectors")
    vectors = ivfpq.open_vectors(workdir / "ivfpq" / ivfpq.VECTORS_NAME)
    t0 = time.perf_counter()
    index = ivfpq.train(vectors, base)
    train_s = time.perf_counter() - t0
    log(f"trained in {train_s:.0f}s; adding {args.n:,} vectors in batches of {base.add_batch:,}")
    t0 = time.perf_counter()
    ivfpq.add_in_batches(index, vectors, base.add_batch)
    ivfpq.write_index(index, workdir / "ivfpq" / ivfpq.FAISS_NAME)
    add_s = time.perf_counter() - t0
    del index, vectors

    configs = [base.model_copy(update={"nprobe": p, "rescore": r}).model_dump() for p in nprobes for r in depths]
    log("probing flat and ivfpq in fresh processes")
    results = {"flat": probe("flat", workdir, args.threads, min(args.timed, 100), [{}])}
    results["ivfpq"] = probe("ivfpq", workdir, args.threads, args.timed, configs)

    gib = 1024**3
    sizes = {
        "flat": (workdir / "flat.index").stat().st_size,
        "ivfpq": (workdir / "ivfpq" / ivfpq.FAISS_NAME).stat().st_size,
        "fp16": (workdir / "ivfpq" / ivfpq.VECTORS_NAME).stat().st_size,
    }
    model = "one Gaussian" if args.model == "gaussian" else f"tied-covariance mixture of {args.clusters} Gaussians"
    print(f"\n## ANN at {args.n:,} x {dim}, {model} fitted to 2Wiki MiniLM passages ({args.threads} thread(s); {len(queries)} 2Wiki questions; "
          f"index {ivfpq.factory_string(dim, base)}, trained on {min(args.train_size, args.n):,})\n")
    print(f"synthetic draw + fp16 write: {synth_s:.0f}s; files: flat {sizes['flat'] / gib:.2f} GiB, "
          f"ivfpq index {sizes['ivfpq'] / gib:.3f} GiB + fp16 vectors {sizes['fp16'] / gib:.2f} GiB (memory-mapped)\n")
    print("| index | nprobe | rescore | recall@10 vs flat | RssAnon after load (GiB) | load (s) | p50 / p95 per query (ms) | build (s) |")
    print("|---|---|---|---|---|---|---|---|")
    flat_res = results["flat"]
    print(f"| flat | - | - | 1.000 | {flat_res['rss_after_load'] / gib:.2f} | {flat_res['load_s']:.2f} | "
          f"{flat_res['runs'][0]['p50_ms']:.1f} / {flat_res['runs'][0]['p95_ms']:.1f} | {flat_build_s:.0f} (write) |")
    res = results["ivfpq"]
    for i, run in enumerate(res["runs"]):
        rows = np.load(workdir / f"rows-ivfpq-{i}.npy")
        c = run["config"]
        print(f"| ivfpq | {c['nprobe']} | {c['rescore']} | {recall_at(rows, truth):.3f} | "
              f"{res['rss_after_load'] / gib:.3f} | {res['load_s']:.2f} | {run['p50_ms']:.2f} / {run['p95_ms']:.2f} | "
              f"{train_s:.0f} train + {add_s:.0f} add |")
    print(f"\nRssAnon before load (interpreter, numpy, faiss): flat {flat_res['rss_before'] / gib:.3f} GiB, "
          f"ivfpq {res['rss_before'] / gib:.3f} GiB; after all searches: flat {flat_res['rss_after_search'] / gib:.2f}, "
          f"ivfpq {res['rss_after_search'] / gib:.3f} GiB.")
    print(f"Targets: recall@10 >= {TARGETS['recall']}, RssAnon <= {TARGETS['rss_gb']} GB, "
          f"p50 <= {TARGETS['p50_ms']} ms, load <= {TARGETS['load_s']} s.")
    if not args.keep:
        for path in [workdir / "flat.index", workdir / "ivfpq" / ivfpq.FAISS_NAME, workdir / "ivfpq" / ivfpq.VECTORS_NAME,
                     *workdir.glob("rows-*.npy")]:
            path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
