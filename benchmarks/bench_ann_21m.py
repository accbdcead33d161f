"""Beyond RAM: an ``ivfpq`` index of 21M x 384 synthetic vectors built shard by shard, never
holding all the vectors in memory, then served memory-mapped.

    nohup nice -n 19 python3 benchmarks/bench_ann_21m.py > bench21m.log 2>&1 &     # resumable
    nice -n 19 python3 benchmarks/bench_ann_21m.py --n 2000000 --shard 500000      # smaller

Resumable shard by shard (``--shard`` rows; a rerun skips what an earlier run finished):

* **draw**: shard ``s`` is drawn from the seeded generator ``(seed, s)`` of the same synthetic
  model as ``bench_ann.py`` (a tied-covariance Gaussian mixture fitted to the bundled MiniLM's
  embeddings of the 2Wiki passages, L2-normalised) and written into its rows of one fp16 file
  ``ivfpq/vectors.f16.npy`` (the file the ``ivfpq`` index re-scores from; created sparse at its
  full size); at most one shard of float32 vectors is in memory.
* **train** (once, after the first ``ceil(train_size / shard)`` shards are drawn):
  ``routerag.index.ivfpq.train`` on a seeded sample of ``--train-size`` of those rows (the draws
  are i.i.d., so a sample of the first shards is a sample of the corpus's distribution).
* **add**: each shard is read back from the fp16 file, added to a copy of the trained empty
  index with ids = row numbers (row i = vector i = id i) and written as its own shard index;
  the exact top 10 of the first ``--timed`` real 2Wiki questions within the shard is kept
  beside it, so recall against exact search over all N comes without a flat index (which would
  need N x 384 x 4 bytes: 32 GB at 21M).

Then the shard indexes are merged into the trained index (its inverted lists, N x (m + 8) bytes,
are in memory for the merge; the vectors never are), written as ``ivfpq/faiss.index``, and a fresh
process loads it as ``IVFPQIndex.load`` does (``IO_FLAG_MMAP | IO_FLAG_READ_ONLY``; fp16 vectors mapped) and
reports ``RssAnon`` before/after the load and after searching, load time and per-query latency.

``--stop-after-shards K`` (or a deadline ``--deadline HH:MM`` UTC) merges and probes the first K
shards only (an index over the first K x shard rows), so a partial run still measures something;
the per-shard times say what the rest needs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ann import PROBE_PRELUDE, fit_model, log, real_embeddings  # noqa: E402  (the same synthetic model, probe, log)

GIB = 1024**3

_PROBE = PROBE_PRELUDE + textwrap.dedent(
    """
    directory, n, threads, timed = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    configs = json.loads(sys.argv[5])
    import faiss
    faiss.omp_set_num_threads(threads)
    queries = np.load(directory.parent / "queries.npy")
    from routerag.index import ivfpq
    from routerag.index.settings import IVFPQSettings
    settings = IVFPQSettings.model_validate(configs[0])
    before = rss_anon()
    t0 = time.perf_counter()
    index = ivfpq.IVFPQIndex(ivfpq.read_index(directory / ivfpq.FAISS_NAME),
                             ivfpq.open_vectors(directory / ivfpq.VECTORS_NAME)[:n], settings, directory)
    load_s = time.perf_counter() - t0
    after = rss_anon()
    out = {"load_s": load_s, "rss_before": before, "rss_after_load": after, "runs": []}
    for i, config in enumerate(configs):
        index = ivfpq.IVFPQIndex(index.index, index.vectors16, IVFPQSettings.model_validate(config))
        lat = []
        for q in queries[:timed]:  # timed first: the first pass over the files is the cold one
            t = time.perf_counter()
            index.search(q[None, :], 10)
            lat.append((time.perf_counter() - t) * 1000)
        _, rows = index.search(queries[:timed], 10)  # the questions whose exact top 10 is known
        np.save(directory.parent / f"rows-{i}.npy", rows)
        out["runs"].append({"config": config, "p50_ms": float(np.percentile(lat, 50)),
                            "p95_ms": float(np.percentile(lat, 95))})
    out["rss_after_search"] = rss_anon()
    out["rss_file_after_search"] = status_bytes("RssFile")  # mapped index and vector pages resident now
    out["vm_hwm"] = status_bytes("VmHWM")  # peak resident set, anonymous + file-backed
    print(json.dumps(out))
    """
)



def draw_shard(model: tuple[np.ndarray, np.ndarray, np.ndarray], rows: int, seed: int, shard: int) -> np.ndarray:
    """Shard ``shard``'s ``rows`` normalised float32 draws; seeded by ``(seed, shard)`` so any
    shard can be drawn alone (and again) without the others."""
    centres, weights, factor = model
    rng = np.random.default_rng([seed, shard])
    component = rng.choice(len(weights), size=rows, p=weights)
    draw = rng.standard_normal((rows, factor.shape[0]), dtype=np.float32) @ factor.T
    draw += centres[component]
    draw /= np.linalg.norm(draw, axis=1, keepdims=True)
    return draw


def shard_ranges(n: int, shard: int) -> list[tuple[int, int]]:
    return [(at, min(at + shard, n)) for at in range(0, n, shard)]


def exact_top10(vectors: np.ndarray, queries: np.ndarray, offset: int) -> tuple[np.ndarray, np.ndarray]:
    scores = queries @ vectors.T  # (q, rows)
    top = np.argpartition(-scores, 10, axis=1)[:, :10]
    return np.take_along_axis(scores, top, axis=1), top + offset


def open_vector_file(path: Path, n: int, dim: int) -> np.ndarray:
    from numpy.lib.format import open_memmap

    if not path.exists():
        tmp = path.with_name(f".{path.name}.tmp")
        open_memmap(tmp, mode="w+", dtype=np.float16, shape=(n, dim)).flush()  # sparse until written
        os.replace(tmp, path)
    out = open_memmap(path, mode="r+")
    if out.shape != (n, dim):
        raise SystemExit(f"{path} holds {out.shape}, expected {(n, dim)}: use another --workdir")
    return out


def draw(out: np.ndarray, model, shard_rows: list[tuple[int, int]], s: int, seed: int, marks: Path) -> None:
    if (marks / f"{s}.drawn").exists():
        return
    t0 = time.perf_counter()
    lo, hi = shard_rows[s]
    out[lo:hi] = draw_shard(model, hi - lo, seed, s)
    out.flush()
    (marks / f"{s}.drawn").write_text(f"{time.perf_counter() - t0:.2f}")
    log(f"drew shard {s} (rows {lo:,}..{hi:,}) in {time.perf_counter() - t0:.1f}s")


def build(
    workdir: Path,
    model,
    settings,
    n: int,
    dim: int,
    shard: int,
    seed: int,
    truth_queries: np.ndarray,
    stop: int,
    deadline: dt.datetime | None,
    timings: dict,
) -> int:
    """Draw, train (once) and add shard by shard; returns how many leading shards are added."""
    import faiss

    from routerag.index import ivfpq

    marks = workdir / "shards"
    marks.mkdir(exist_ok=True)
    out = open_vector_file(workdir / "ivfpq" / ivfpq.VECTORS_NAME, n, dim)
    shard_rows = shard_ranges(n, shard)
    first = min(-(-settings.train_size // shard), len(shard_rows))
    for s in range(first):
        draw(out, model, shard_rows, s, seed, marks)
    if not (workdir / "trained.index").exists():
        rows = shard_rows[first - 1][1]
        log(f"training {ivfpq.factory_string(dim, settings)} on {min(settings.train_size, rows):,} of the first {rows:,} rows")
        t0 = time.perf_counter()
        index = ivfpq.train(out[:rows], settings)
        timings["train_s"] = time.perf_counter() - t0
        (workdir / "timings.json").write_text(json.dumps(timings))  # kept across resumed runs
        ivfpq.write_index(index, workdir / "trained.index")
        del index
    done = 0
    for s, (lo, hi) in enumerate(shard_rows[:stop]):
        final = marks / f"{s}.index"
        if final.exists():
            done += 1
            continue
        if deadline and dt.datetime.now(dt.timezone.utc) > deadline:
            log(f"deadline passed: stopping after {done} shards")
            break
        draw(out, model, shard_rows, s, seed, marks)
        t0 = time.perf_counter()
        index = faiss.read_index(str(workdir / "trained.index"))
        block = np.ascontiguousarray(out[lo:hi], dtype=np.float32)
        index.add_with_ids(block, np.arange(lo, hi, dtype=np.int64))
        scores, rows = exact_top10(block, truth_queries, lo)
        np.savez(marks / f"{s}.truth.npz", scores=scores, rows=rows)
        (marks / f"{s}.seconds").write_text(f"{time.perf_counter() - t0:.2f}")
        ivfpq.write_index(index, final)  # last: its presence marks the shard done
        done += 1
        log(f"added shard {s} (rows {lo:,}..{hi:,}) in {time.perf_counter() - t0:.1f}s")
    del out
    return done


def merge(workdir: Path, shards: int) -> None:
    """Merge the shard indexes into the trained index (inverted lists in memory: N x (m + 8)
    bytes, not the vectors) and write it as ``ivfpq/faiss.index``, the file ``IVFPQIndex.load``
    memory-maps. (``faiss.contrib.ondisk.merge_ondisk`` would avoid holding the lists, but its
    ``OnDiskInvertedLists`` crash under ``IO_FLAG_MMAP``, the flag routerag loads with: faiss-cpu 1.15.1.)"""
    import faiss

    from routerag.index import ivfpq

    index = faiss.read_index(str(workdir / "trained.index"))
    for s in range(shards):
        index.merge_from(faiss.read_index(str(workdir / "shards" / f"{s}.index")), 0)
    ivfpq.write_index(index, workdir / "ivfpq" / ivfpq.FAISS_NAME)


def truth(workdir: Path, shards: int) -> np.ndarray:
    scores, rows = [], []
    for s in range(shards):
        with np.load(workdir / "shards" / f"{s}.truth.npz") as data:
            scores.append(data["scores"])
            rows.append(data["rows"])
    all_scores, all_rows = np.concatenate(scores, axis=1), np.concatenate(rows, axis=1)
    top = np.argsort(-all_scores, axis=1, kind="stable")[:, :10]
    return np.take_along_axis(all_rows, top, axis=1)


def drop_page_cache() -> None:
    """Empty the kernel's page cache (root only), so that the probe reads the mapped files from disk."""
    subprocess.run(["sync"], check=True)
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
    except OSError as exc:
        raise SystemExit(f"--cold needs root to drop the page cache: {exc}") from None


class MemoryCgroup:
    """A memory cgroup (v2, or v1's ``memory`` controller) below this process's own, capped at
    ``limit`` bytes: everything a process in it touches, page cache of the mapped files included,
    is charged to it and reclaimed beyond the cap. Needs root; removed on exit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        unified = Path("/sys/fs/cgroup/cgroup.controllers").exists()
        own = ""
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            hierarchy, controllers, path = line.split(":", 2)
            if (unified and hierarchy == "0") or (not unified and "memory" in controllers.split(",")):
                own = path.lstrip("/")
        root = Path("/sys/fs/cgroup") if unified else Path("/sys/fs/cgroup/memory")
        self.path = root / own / f"routerag-bench-{os.getpid()}"
        self.limit_file, self.peak_file = (("memory.max", "memory.peak") if unified
                                           else ("memory.limit_in_bytes", "memory.max_usage_in_bytes"))

    def __enter__(self) -> "MemoryCgroup":
        try:
            self.path.mkdir()
            (self.path / self.limit_file).write_text(str(self.limit))
        except OSError as exc:
            raise SystemExit(f"--memory-limit needs a writable memory cgroup (root): {exc}") from None
        return self

    def join(self) -> None:  # preexec_fn of the child
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def peak(self) -> int | None:
        f = self.path / self.peak_file
        return int(f.read_text()) if f.exists() else None

    def __exit__(self, *exc) -> None:
        try:
            self.path.rmdir()
        except OSError:
            pass


def probe(workdir: Path, n: int, threads: int, timed: int, configs: list[dict], memory_limit: int | None = None) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)}
    cmd = [sys.executable, "-c", _PROBE, str(workdir / "ivfpq"), str(n), str(threads), str(timed), json.dumps(configs)]
    if memory_limit is None:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        peak = None
    else:
        with MemoryCgroup(memory_limit) as group:
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, preexec_fn=group.join)
            peak = group.peak()
    if done.returncode:
        raise SystemExit(f"probe failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["cgroup_peak"] = peak
    return out


def recall_at(rows: np.ndarray, exact: np.ndarray) -> float:
    return float(np.mean([len(set(r.tolist()) & set(t.tolist())) / 10 for r, t in zip(rows, exact)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=21_000_000)
    parser.add_argument("--shard", type=int, default=500_000, help="rows drawn / added per shard")
    parser.add_argument("--nlist", type=int, default=1024)
    parser.add_argument("--m", type=int, default=48)
    parser.add_argument("--train-size", type=int, default=65_536)
    parser.add_argument("--nprobe", default="16,32,64")
    parser.add_argument("--rescore", default="100,300")
    parser.add_argument("--threads", type=int, default=2, help="FAISS/BLAS threads, build and search")
    parser.add_argument(
        "--timed", type=int, default=200, help="questions timed one by one per configuration (and whose exact top 10 is computed)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cold", action="store_true", help="drop the page cache before the probe (root): the first "
                        "configuration then reads the index and vectors from disk")
    parser.add_argument("--memory-limit", type=float, default=None, help="GiB: run the probe in a memory cgroup "
                        "capped there (root), page cache of the mapped files included; use with --cold")
    parser.add_argument("--stop-after-shards", type=int, default=None)
    parser.add_argument("--deadline", default=None, help="HH:MM UTC: stop adding shards after it, merge and probe what is done")
    parser.add_argument("--workdir", type=Path, default=None, help="default: <routerag cache>/bench_ann_21m/<n>")
    args = parser.parse_args()

    import faiss

    from routerag.index import ivfpq
    from routerag.index.settings import IVFPQSettings
    from routerag.paths import cache_dir

    faiss.omp_set_num_threads(args.threads)
    workdir = args.workdir or cache_dir("bench_ann_21m") / str(args.n)
    (workdir / "ivfpq").mkdir(parents=True, exist_ok=True)
    nprobes = [int(x) for x in args.nprobe.split(",")]
    depths = [int(x) for x in args.rescore.split(",")]
    base = IVFPQSettings(nlist=args.nlist, m=args.m, nprobe=min(nprobes), train_size=args.train_size, seed=args.seed)
    deadline = None
    if args.deadline:
        hh, mm = (int(x) for x in args.deadline.split(":"))
        deadline = dt.datetime.now(dt.timezone.utc).replace(hour=hh, minute=mm, second=0, microsecond=0)

    real = real_embeddings(cache_dir("bench_ann"))
    queries = real["queries"].astype(np.float32)
    np.save(workdir / "queries.npy", queries)
    centres, weights, cov = fit_model(real, "tied-gmm", 256, args.seed)
    dim = cov.shape[0]
    factor = np.linalg.cholesky(cov + 1e-9 * np.eye(dim)).astype(np.float32)
    model = (centres.astype(np.float32), weights, factor)
    timings: dict[str, float] = {}
    timings_file = workdir / "timings.json"
    if timings_file.exists():
        timings = json.loads(timings_file.read_text())

    n_shards = len(shard_ranges(args.n, args.shard))
    stop = min(args.stop_after_shards or n_shards, n_shards)
    done = build(workdir, model, base, args.n, dim, args.shard, args.seed, queries[: args.timed], stop, deadline, timings)
    timings_file.write_text(json.dumps(timings))
    timings["draw_s"] = sum(float((workdir / "shards" / f"{s}.drawn").read_text()) for s in range(done))
    if done == 0:
        raise SystemExit("no shard added")
    n = min(done * args.shard, args.n)
    timings["add_s"] = sum(float((workdir / "shards" / f"{s}.seconds").read_text()) for s in range(done))
    log(f"merging {done} shard indexes ({n:,} vectors) into one on-disk index")
    t0 = time.perf_counter()
    merge(workdir, done)
    timings["merge_s"] = time.perf_counter() - t0
    timings_file.write_text(json.dumps(timings))
    exact = truth(workdir, done)

    configs = [base.model_copy(update={"nprobe": p, "rescore": r}).model_dump() for p in nprobes for r in depths]
    log(f"probing {n:,} vectors in a fresh process ({args.threads} threads)")
    if args.cold:
        drop_page_cache()
    limit = int(args.memory_limit * GIB) if args.memory_limit else None
    res = probe(workdir, n, args.threads, args.timed, configs, limit)

    files = {name: (workdir / "ivfpq" / name).stat().st_size for name in ("faiss.index", "vectors.f16.npy")}
    print(
        f"\n## ivfpq beyond RAM: {n:,} x {dim} ({'all' if n == args.n else 'part'} of {args.n:,}), "
        f"{ivfpq.factory_string(dim, base)}, {args.threads} threads\n"
    )
    print(
        f"build: draw + fp16 write {timings['draw_s']:.0f}s, train on {args.train_size:,} {timings.get('train_s', float('nan')):.0f}s, "
        f"add {done} shards {timings['add_s']:.0f}s (per shard of {args.shard:,}: draw {timings['draw_s'] / done:.1f}s, add {timings['add_s'] / done:.1f}s), merge {timings['merge_s']:.0f}s"
    )
    print(
        f"files: faiss.index {files['faiss.index'] / GIB:.2f} GiB "
        f"+ vectors.f16.npy {files['vectors.f16.npy'] / GIB:.2f} GiB (all memory-mapped); "
        f"flat would hold {n * dim * 4 / GIB:.1f} GiB ({n * dim * 4 / 1e9:.1f} GB) of float32 in RAM\n"
    )
    print(
        f"| nprobe | rescore | recall@10 vs exact ({len(exact)} questions) | RssAnon after load (GiB) | load (s) | p50 / p95 per query (ms) |"
    )
    print("|---|---|---|---|---|---|")
    for i, run in enumerate(res["runs"]):
        rows = np.load(workdir / f"rows-{i}.npy")[: len(exact)]
        c = run["config"]
        print(
            f"| {c['nprobe']} | {c['rescore']} | {recall_at(rows, exact):.3f} | {res['rss_after_load'] / GIB:.3f} | "
            f"{res['load_s']:.2f} | {run['p50_ms']:.2f} / {run['p95_ms']:.2f} |"
        )
    print(
        f"\nRssAnon before load {res['rss_before'] / GIB:.3f} GiB, after all searches {res['rss_after_search'] / GIB:.3f} GiB; "
        f"file-backed pages resident after all searches (RssFile) {res['rss_file_after_search'] / GIB:.3f} GiB, "
        f"peak RSS (VmHWM, anonymous + file) {res['vm_hwm'] / GIB:.3f} GiB{' (page cache dropped before the probe)' if args.cold else ''}. "
        "Targets: RSS <= 4 GB, p50 <= 20 ms on 2 cores."
    )
    if limit:
        print(f"The probe ran in a memory cgroup capped at {args.memory_limit:g} GiB (page cache charged to it); "
              f"its peak charge {res['cgroup_peak'] / GIB:.3f} GiB.")


if __name__ == "__main__":
    main()
