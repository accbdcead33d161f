"""Passage-embedding throughput of the index embedder (the dense build's cost), per device and
precision, in one run so the rows compare as ratios.

    python3 benchmarks/bench_embed.py --n 20000                          # this machine's CPU
    python3 benchmarks/bench_embed.py --n 200000 --device cuda --device cpu --cpu-n 20000

Passages: the bundled demo corpora's real 2Wiki + MuSiQue paragraphs (``src/routerag/data/demo``,
so it runs on a node without ``../shared/data``), cycled to ``--n`` with a distinct suffix each
(the bulk path embeds identical strings once). Each row is one ``Embedder.encode`` call over all
of them — the call an index build makes — after a warm-up call, through
``routerag.index.embedder.SentenceTransformerEmbedder`` with ``EmbedderConfig(device, dtype)``.
Prints markdown: passages/s, tokens/s, seconds, and the hours a 21M-passage corpus (the
Wikipedia-2018 dump of RouteRAG's released index) would take at that rate on one device.
``--check`` also reports the top-5 agreement of each row's vectors with the first row's.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

DEMO = Path(__file__).resolve().parents[1] / "src" / "routerag" / "data" / "demo"
WIKI_2018 = 21_000_000


def demo_passages() -> list[str]:
    """The demo corpora's paragraphs as ``title. text`` strings (as the dense index embeds them)."""
    rows: list[str] = []
    for name in ("2wiki_corpus.json", "musique_corpus.json"):
        for doc in json.loads((DEMO / name).read_text(encoding="utf-8")):
            rows.append(f"{doc.get('title', '')}. {doc['text']}")
    return rows


def passages(n: int) -> list[str]:
    pool = demo_passages()
    return [f"{pool[i % len(pool)]} ({i // len(pool)})" for i in range(n)]


def run(device: str, dtype: str, texts: list[str], model: str | None = None) -> tuple[dict[str, float | str | int], np.ndarray]:
    import torch

    from routerag.index.embedder import EmbedderConfig, SentenceTransformerEmbedder

    config = EmbedderConfig(device=device, dtype=dtype, **({"model": model} if model else {}))
    emb = SentenceTransformerEmbedder(config)
    tokenizer = emb.model.tokenizer
    tokens = sum(len(x) for x in tokenizer(texts[:2000], truncation=True, max_length=emb.model.max_seq_length)["input_ids"])
    tokens_per_text = tokens / min(len(texts), 2000)
    emb.encode([f"warm-up {t}" for t in texts[:1024]])
    if emb.device != "cpu":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    vectors = emb.encode(texts)
    if emb.device != "cpu":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    rate = len(texts) / seconds
    row = {"device": emb.device, "dtype": emb.dtype, "threads": torch.get_num_threads(), "n": len(texts),
           "seconds": round(seconds, 2), "passages_s": round(rate, 1), "tokens_s": round(rate * tokens_per_text),
           "hours_21m": round(WIKI_2018 / rate / 3600, 2)}
    return row, vectors


def top5_agreement(a: np.ndarray, b: np.ndarray, queries: int = 200) -> float:
    """Mean overlap of the top-5 neighbours (inner product) of the first ``queries`` rows."""
    n = min(len(a), len(b), len(demo_passages()))  # the distinct passages: later rows are their near-copies
    qa, qb = a[:queries], b[:queries]
    na = np.argsort(-(qa @ a[:n].T), axis=1)[:, :5]
    nb = np.argsort(-(qb @ b[:n].T), axis=1)[:, :5]
    return float(np.mean([len(set(x) & set(y)) / 5 for x, y in zip(na, nb)]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20000, help="passages per row")
    ap.add_argument("--device", action="append", help="cpu, cuda, auto (repeatable; default cpu)")
    ap.add_argument("--dtype", action="append", help="float32, bfloat16, auto (repeatable; default auto)")
    ap.add_argument("--cpu-n", type=int, default=None, help="passages for the cpu rows (default --n)")
    ap.add_argument("--model", default=None, help="a sentence-transformers folder (default: the bundled all-MiniLM-L6-v2)")
    ap.add_argument("--check", action="store_true", help="top-5 agreement of each row's vectors with the first row's")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    args = ap.parse_args()
    rows, first = [], None
    for device in args.device or ["cpu"]:
        for dtype in args.dtype or ["auto"]:
            n = args.cpu_n if device == "cpu" and args.cpu_n else args.n
            row, vectors = run(device, dtype, passages(n), args.model)
            if args.check:
                first = vectors if first is None else first
                row["top5_vs_first"] = round(top5_agreement(first, vectors), 3)
            rows.append(row)
            print(json.dumps(row), flush=True)
    cols = list(rows[0])
    print("\n| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
