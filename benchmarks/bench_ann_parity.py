"""Retrieval parity of the ``ivfpq`` dense index with ``flat`` on 2WikiMultihopQA.

    nice -n 10 python3 benchmarks/bench_ann_parity.py                 # nlist 64, nprobe 8,16, rescore 0,100

The 6,119 2Wiki passages and 1,000 questions embedded with the bundled MiniLM embedder (the vectors
the ``dense`` component stores; cached by ``bench_ann.py`` in ``<routerag cache>/bench_ann/real.npz``),
indexed exact (``IndexFlatIP``) and with :class:`routerag.index.ivfpq.IVFPQIndex` (the code the
``ivfpq`` dense component runs). Answer recall@k: the gold answer string (normalised) occurs in one
of the top-k passages. Paired per question: the difference with a 95% bootstrap CI and an exact
two-sided sign test over the questions where the two disagree.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

import numpy as np
from bench_ann import real_embeddings  # benchmarks/ is the script's folder


def sign_test(wins: int, losses: int) -> float:
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nlist", type=int, default=64)
    parser.add_argument("--m", type=int, default=48)
    parser.add_argument("--nbits", type=int, default=8)
    parser.add_argument("--nprobe", default="8,16")
    parser.add_argument("--rescore", default="0,100")
    parser.add_argument("--k", type=int, default=5)
    args = parser.parse_args()

    import faiss

    from routerag.corpus.datasets import data_root
    from routerag.corpus.loaders import load_corpus
    from routerag.corpus.normalize import normalize_answer
    from routerag.index.ivfpq import IVFPQIndex
    from routerag.index.settings import IVFPQSettings
    from routerag.paths import cache_dir

    faiss.omp_set_num_threads(1)
    real = real_embeddings(cache_dir("bench_ann"))
    passages, queries = real["passages"], real["queries"]
    folder = data_root() / "2wikimultihopqa"
    docs = load_corpus(folder / "2wikimultihopqa_corpus.json").docs
    answers = [json.loads(line)["answer"] for line in (folder / "2wikimultihopqa_questions.jsonl").open()]
    assert len(docs) == len(passages) and len(answers) == len(queries)
    texts = [f" {normalize_answer(f'{d.title} {d.text}')} " for d in docs]
    golds = [normalize_answer(a) for a in answers]

    def hits(rows: np.ndarray) -> np.ndarray:
        return np.array([any(r >= 0 and f" {g} " in texts[r] for r in row[: args.k]) for g, row in zip(golds, rows)])

    flat = faiss.IndexFlatIP(passages.shape[1])
    flat.add(passages)
    _, flat_rows = flat.search(queries, 10)
    flat_hits = hits(flat_rows)
    rng = np.random.default_rng(0)
    boot = rng.integers(0, len(queries), size=(2000, len(queries)))

    base = IVFPQSettings(nlist=args.nlist, m=args.m, nbits=args.nbits, nprobe=args.nlist, train_size=len(passages))
    with tempfile.TemporaryDirectory() as tmp:
        built = IVFPQIndex.build([passages], len(passages), passages.shape[1], Path(tmp), base)
        print(f"\n## 2Wiki answer recall@{args.k}: ivfpq vs flat ({len(passages):,} passages, {len(queries):,} questions)\n")
        print(f"flat: {flat_hits.mean():.3f}\n")
        print(f"| nlist | m x nbits | nprobe | rescore | recall@10 vs flat | answer recall@{args.k} | diff vs flat [95% CI] | ivfpq-only / flat-only hits | sign test p |")
        print("|---|---|---|---|---|---|---|---|---|")
        for nprobe in (int(x) for x in args.nprobe.split(",")):
            for depth in (int(x) for x in args.rescore.split(",")):
                index = IVFPQIndex(built.index, built.vectors16, base.model_copy(update={"nprobe": nprobe, "rescore": depth}))
                _, rows = index.search(queries, 10)
                overlap = np.mean([len(set(a.tolist()) & set(b.tolist())) / 10 for a, b in zip(rows, flat_rows)])
                got = hits(rows)
                diff = got.astype(float) - flat_hits.astype(float)
                ci = np.percentile(diff[boot].mean(axis=1), [2.5, 97.5])
                wins, losses = int((got & ~flat_hits).sum()), int((~got & flat_hits).sum())
                print(f"| {args.nlist} | {args.m}x{args.nbits} | {nprobe} | {depth} | {overlap:.3f} | {got.mean():.3f} | "
                      f"{diff.mean():+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}] | {wins} / {losses} | {sign_test(wins, losses):.2f} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
