"""Ray Data index build (``routerag index --engine ray``'s pipeline): throughput and driver memory
at 0.5M and 1M synthetic passages.

    nice -n 19 python3 benchmarks/bench_ray_index.py --rows 500000 1000000

Embedding 1M passages with MiniLM on 2 CPU cores takes hours, so the embedder here is a cheap
deterministic stand-in registered for this benchmark only (``HashEmbedder``: a 384-d unit vector
seeded by a hash of the passage; no model). It measures the pipeline around the model: reading
docs.jsonl by byte range, the actor pool, writing the fp16 vector shards, and the driver's
memory while it runs, not embedding speed. The rows are ``ivfpq`` shards of ``add_batch``
(65,536) rows, as in the real build. ``--ivfpq`` also trains and adds the IVF-PQ index from the
shards, twice: the add step in the driver and on Ray actors (``routerag index --engine ray``), the
two indexes compared byte for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

DIM = 384


class HashEmbedder:
    """A deterministic, row-independent embedder without a model (benchmarks only)."""

    identity = "bench-hash:384"
    dim = DIM

    def __init__(self, config: object) -> None:
        self.config = config

    def encode(self, texts: Sequence[str], *, is_query: bool = False) -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")
            out[i] = np.random.default_rng(seed).standard_normal(DIM, dtype=np.float32)
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out


def write_corpus(path: Path, rows: int) -> None:
    """``rows`` synthetic documents in the bundle's docs.jsonl format (~40 words each)."""
    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(50_000)]
    with path.open("w", encoding="utf-8") as handle:
        for start in range(0, rows, 10_000):
            words = rng.integers(0, len(vocab), size=(min(10_000, rows - start), 40))
            for j, row in enumerate(words):
                i = start + j
                text = " ".join(vocab[w] for w in row)
                handle.write(json.dumps({"doc_id": f"d{i:012d}", "title": f"Title {i}", "text": text,
                                         "source": "default", "metadata": {}}) + "\n")


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class PeakRSS:
    def __init__(self) -> None:
        self.peak = rss_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, rss_mb())

    def __enter__(self) -> "PeakRSS":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb())


def build_ivfpq(shards: list, rows: int, work: Path, settings, cpus: int) -> dict:
    """The IVF-PQ build from the shards twice, in one run: the add step in this process (FAISS's
    own threads) and on ``cpus`` Ray actors with the parts merged here (``--engine ray``); build
    and add-step seconds, the driver's peak RSS, and whether the two indexes are the same bytes."""
    from routerag.index.ivfpq import FAISS_NAME, IVFPQIndex, add_here
    from routerag.index.ray_build import ray_ivfpq_adder

    out: dict = {}
    for name, adder in (("here", add_here), ("ray", ray_ivfpq_adder(work / f"parts-{rows}", actors=cpus))):
        spent: list[float] = []

        def timed(index, path, batch, adder=adder, spent=spent):
            t = time.perf_counter()
            adder(index, path, batch)
            spent.append(time.perf_counter() - t)

        with PeakRSS() as peak:
            t0 = time.perf_counter()
            IVFPQIndex.build((np.load(s.path, mmap_mode="r") for s in shards), rows, DIM, work / f"ivfpq-{rows}-{name}",
                             settings, adder=timed)
            out |= {f"ivfpq_{name}_build_s": round(time.perf_counter() - t0, 1), f"ivfpq_{name}_add_s": round(spent[0], 1),
                    f"ivfpq_{name}_driver_rss_peak_mb": round(peak.peak)}
    out["ivfpq_same_bytes"] = (work / f"ivfpq-{rows}-here" / FAISS_NAME).read_bytes() == (work / f"ivfpq-{rows}-ray" / FAISS_NAME).read_bytes()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[500_000, 1_000_000])
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--ivfpq", action="store_true",
                        help="also build the IVF-PQ index from the shards, the add step here and on Ray actors")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from routerag.index.dense import embedding_shards
    from routerag.index.embedder import EmbedderConfig
    from routerag.index.ray_build import embed_with_ray, remove_shards
    from routerag.index.settings import DenseSettings
    from routerag.raycluster import LocalHead

    head = LocalHead(num_cpus=args.cpus)  # before anything imports ray
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-ray-index-"))
    work.mkdir(parents=True, exist_ok=True)
    dense = DenseSettings.model_validate({"faiss": "ivfpq", "ivfpq": {"nlist": 1024, "m": 48, "nbits": 8, "nprobe": 16}})
    results = []
    for rows in args.rows:
        corpus = work / f"docs-{rows}.jsonl"
        if not corpus.exists():
            t0 = time.perf_counter()
            write_corpus(corpus, rows)
            print(f"wrote {rows:,} synthetic documents in {time.perf_counter() - t0:.0f}s", flush=True)
        shards_dir = work / f"shards-{rows}"
        ranges = embedding_shards(rows, dense)
        before = rss_mb()
        with PeakRSS() as peak:
            t0 = time.perf_counter()
            shards = embed_with_ray(corpus, ranges, EmbedderConfig(), shards_dir, dtype="float16", factory=HashEmbedder)
            wall = time.perf_counter() - t0
        result = {
            "rows": rows, "shards": len(shards), "pipeline_s": round(wall, 1), "rows_per_s": round(rows / wall),
            "driver_rss_before_mb": round(before), "driver_rss_peak_mb": round(peak.peak),
            "shard_bytes_mb": round(sum(Path(s.path).stat().st_size for s in shards) / 2**20),
        }
        if args.ivfpq:
            result |= build_ivfpq(shards, rows, work, dense.ivfpq, args.cpus)
        remove_shards(shards_dir)
        results.append(result)
        print(json.dumps(result), flush=True)
    head.stop()
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
