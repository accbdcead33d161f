"""Local vs global personalized PageRank: per-query latency as the graph grows, and top-5 parity
on a real graph.

    nice -n 19 python3 benchmarks/bench_ppr.py --stage synthetic --nodes 1000000,3000000,10000000
    nice -n 19 python3 benchmarks/bench_ppr.py --stage 2wiki --index /path/to/2wiki-index

* ``synthetic``: HippoRAG-shaped graphs with the proportions of the spaCy graph of HotpotQA
  (4,948 passages, 59,814 entities: 12 entities per passage; 20 passage-entity, ~11 fact edges per
  passage; 1.8 synonym edges per entity). Every entity is extracted from one home passage; each
  passage also links 8 entities drawn from a power law (hub entities with tens of thousands of
  passages, as "american" or "film" in a real graph); fact edges join entities of the same
  passage; synonym edges join random entity pairs (weight 0.8-1). A query seeds the entities of
  one random passage (weight 1/#passages of the entity, as HippoRAG) and gives a dense prior to
  ``--prior-topk`` passages: its own passage and random others (the worst case for locality: real
  dense neighbours are nearer in the graph). The **global** PPR is today's exact path: the power
  iteration over the whole graph with every passage in the reset (weight 0.05 x a uniform prior
  score). The **local** PPR pushes from the seeds and the top passages only, over CSR arrays
  saved as ``.npy`` and memory-mapped (``np.load(mmap_mode="r")``; the page cache is warm, the
  files were just written). Latency is wall time per query, one query at a time, one thread.
* ``2wiki``: a built 2Wiki graph index (``routerag index 2wiki -o DIR -c graph``); every question
  of the shared 2Wiki sample is ranked by the exact graph source and by each approximation; prints
  the share of questions whose top-5 passages (in order, and as a set) equal the exact ones, and
  the per-query latency of the rank step (embedding excluded).

Prints markdown tables (numbers go to docs/experiments/ with this command).
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from pathlib import Path

import numpy as np

ENTITIES_PER_PASSAGE = 12
POPULAR_LINKS = 8
SYNONYMS_PER_ENTITY = 1.8
DAMPING = 0.5
PASSAGE_NODE_WEIGHT = 0.05


def synthetic_graph(n_nodes: int, seed: int = 0) -> tuple[int, int, np.ndarray, np.ndarray]:
    """``(n_entities, n_passages, edges, weights)``; entity nodes first, then passage nodes."""
    rng = np.random.default_rng(seed)
    n_passages = max(1, n_nodes // (ENTITIES_PER_PASSAGE + 1))
    n_entities = n_nodes - n_passages
    home = rng.integers(0, n_passages, n_entities)
    rank_to_entity = rng.permutation(n_entities)
    popular = rank_to_entity[(n_entities * rng.random(n_passages * POPULAR_LINKS) ** 3).astype(np.int64)]
    # passage-entity edges (a set: a popular draw of a passage's own entity is one edge)
    key = np.unique(
        np.concatenate([home, np.repeat(np.arange(n_passages), POPULAR_LINKS)]).astype(np.int64) * n_entities
        + np.concatenate([np.arange(n_entities), popular])
    )
    passage_entity = np.stack([n_entities + key // n_entities, key % n_entities], axis=1)
    del key, popular
    # fact edges: consecutive entities of the same home passage
    order = np.argsort(home, kind="stable")
    same = home[order[1:]] == home[order[:-1]]
    facts = np.stack([order[:-1][same], order[1:][same]], axis=1)
    del order, same, home
    # synonym edges: random entity pairs
    n_syn = int(SYNONYMS_PER_ENTITY * n_entities)
    synonyms = rng.integers(0, n_entities, (n_syn, 2))
    synonyms = synonyms[synonyms[:, 0] != synonyms[:, 1]]
    edges = np.concatenate([facts, passage_entity, synonyms]).astype(np.int64)
    weights = np.concatenate([np.ones(len(facts) + len(passage_entity)), 0.8 + 0.2 * rng.random(len(synonyms))])
    return n_entities, n_passages, edges, weights


def queries(indptr: np.ndarray, indices: np.ndarray, n_entities: int, n_passages: int, count: int, prior_topk: int, seed: int = 1):
    """Per query: seed entities and weights, and the prior's passage rows and weights."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        passage = int(rng.integers(n_passages))
        node = n_entities + passage
        entities = np.asarray(indices[indptr[node] : indptr[node + 1]], dtype=np.int64)[:8]
        degree = np.asarray(indptr[entities + 1] - indptr[entities], dtype=np.float64)
        seeds = rng.random(len(entities)) / np.maximum(degree, 1.0)
        rows = np.unique(np.concatenate([[passage], rng.integers(0, n_passages, prior_topk - 1)]))
        prior = PASSAGE_NODE_WEIGHT * rng.uniform(0.5, 1.0, len(rows))
        out.append((entities, seeds, rows, prior))
    return out


def stage_synthetic(args) -> None:
    from routerag.index.local_ppr import LocalPPR, csr_from_edges, load_csr, save_csr
    from routerag.index.ppr import PowerPPR

    print("| nodes | edges | local p50 ms | local p90 ms | pushes p50 | adjacency read p50 | global p50 ms | global build s | local/global top-5 same |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n_nodes in args.nodes:
        t0 = time.perf_counter()
        n_entities, n_passages, edges, weights = synthetic_graph(n_nodes)
        with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
            save_csr(Path(tmp), *csr_from_edges(n_nodes, edges, weights))
            gc.collect()
            indptr, indices, probs = load_csr(Path(tmp))  # type: ignore[misc]
            local = LocalPPR(indptr, indices, probs, DAMPING, tol=args.tol)
            qs = queries(indptr, indices, n_entities, n_passages, args.queries, args.prior_topk)
            gen_s = time.perf_counter() - t0
            local.run(qs[0][0], qs[0][1])  # allocates the workspace
            times, pushes, reads, local_top = [], [], [], []
            for entities, seeds, rows, prior in qs:
                t = time.perf_counter()
                nodes, scores = local.run(np.concatenate([entities, rows + n_entities]), np.concatenate([seeds, prior]))
                times.append(time.perf_counter() - t)
                pushes.append(local.pushes)
                reads.append(local.edges_read)
                passages = nodes >= n_entities
                best = np.argsort(-scores[passages], kind="stable")[:5]
                local_top.append(set((nodes[passages][best] - n_entities).tolist()))
            del local
            global_ms, build_s, same = float("nan"), float("nan"), float("nan")
            if args.global_queries:
                t = time.perf_counter()
                power = PowerPPR(n_nodes, edges, weights, DAMPING)
                build_s = time.perf_counter() - t
                del edges, weights
                gc.collect()
                rng = np.random.default_rng(2)
                g_times, agree = [], []
                for q, (entities, seeds, rows, prior) in enumerate(qs[: args.global_queries]):
                    # today's path: every passage in the reset (prior scores uniform, the top ones as above)
                    reset = np.zeros(n_nodes)
                    reset[n_entities:] = PASSAGE_NODE_WEIGHT * rng.uniform(0.0, 0.5, n_passages)
                    reset[rows + n_entities] = prior
                    np.add.at(reset, entities, seeds)
                    t = time.perf_counter()
                    p = power.run(reset)
                    g_times.append(time.perf_counter() - t)
                    # the same sparse reset through the power iteration: does the push give the same top 5?
                    sparse = np.zeros(n_nodes)
                    sparse[rows + n_entities] = prior
                    np.add.at(sparse, entities, seeds)
                    exact_top = np.argsort(-power.run(sparse)[n_entities:], kind="stable")[:5]
                    agree.append(set(exact_top.tolist()) == local_top[q])
                    del p, reset, sparse
                global_ms = 1000 * float(np.median(g_times))
                same = float(np.mean(agree))
                del power
            else:
                del edges, weights
            n_edges = int(indptr[-1]) // 2
            del indptr, indices, probs
            gc.collect()
        print(
            f"| {n_nodes:,} | {n_edges:,} | {1000 * np.median(times):.2f} | {1000 * np.percentile(times, 90):.2f} | "
            f"{int(np.median(pushes)):,} | {int(np.median(reads)):,} | {global_ms:.0f} | {build_s:.1f} | {same:.2f} |",
            flush=True,
        )
        if args.verbose:
            print(f"  (graph generated + CSR written in {gen_s:.1f} s)", flush=True)


def stage_2wiki(args) -> None:
    from routerag.corpus.datasets import load_dataset
    from routerag.index.docstore import DocStore
    from routerag.index.graph import GraphIndex
    from routerag.index.settings import IndexSettings
    from routerag.index.threads import single_threaded_blas
    from routerag.sources.graph import GraphSource

    index = Path(args.index)
    settings = IndexSettings.model_validate(_yaml(index / "config.resolved.yaml"))
    store = DocStore.load(index)
    questions = [q.question for q in load_dataset(args.dataset).questions][: args.limit]
    base = GraphIndex.load(index / "graph", store, settings)
    vectors = base.embed_queries(questions)
    variants = {"exact (power)": {}}
    for spec in args.variants:
        variants[spec] = dict(item.split("=", 1) for item in spec.split(","))
    results = {}
    for name, update in variants.items():
        graph_settings = settings.graph.model_copy(update=_typed(settings.graph, update))
        # the loaded graph's content, shared: only the settings (and the solvers they pick) differ
        graph = GraphIndex(
            store, settings.model_copy(update={"graph": graph_settings}), base.data, base.records, base.manifest, base.directory
        )
        graph._power = base.power_ppr  # same graph, same damping: build the power solver once
        source = GraphSource(graph)
        with single_threaded_blas():
            source.rank(questions[:2], 5, vectors[:2])  # warm: CSR, ANN index, workspaces
            times, ranked = [], []
            for i in range(len(questions)):
                t = time.perf_counter()
                ranked.extend(source.rank(questions[i : i + 1], 5, vectors[i : i + 1]))
                times.append(time.perf_counter() - t)
        results[name] = ([[h.doc_id for h in hits] for hits, _ in ranked], times)
        print(f"  {name}: done, rank p50 {1000 * np.median(times):.2f} ms", flush=True)
    exact = results["exact (power)"][0]
    print(f"{args.dataset} graph index {index} ({base.n_nodes:,} nodes), {len(questions)} questions, top-5")
    print("| variant | top-5 identical (order) | top-5 same set | rank p50 ms | rank p90 ms |")
    print("|---|---:|---:|---:|---:|")
    for name, (lists, times) in results.items():
        order = np.mean([a == b for a, b in zip(lists, exact)])
        same = np.mean([set(a) == set(b) for a, b in zip(lists, exact)])
        print(f"| {name} | {order:.3f} | {same:.3f} | {1000 * np.median(times):.2f} | {1000 * np.percentile(times, 90):.2f} |", flush=True)


def _yaml(path: Path) -> dict:
    import yaml

    return yaml.safe_load(path.read_text())


def _typed(model, update: dict[str, str]) -> dict:
    """``key=value`` strings to the field's type (the settings model validates the rest)."""
    out = {}
    for key, value in update.items():
        current = getattr(model, key)
        out[key] = type(current)(value) if not isinstance(current, str) else value
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", choices=["synthetic", "2wiki"], default="synthetic")
    parser.add_argument("--nodes", type=lambda s: [int(x) for x in s.split(",")], default=[1_000_000, 3_000_000])
    parser.add_argument("--queries", type=int, default=100, help="local PPR queries timed per size")
    parser.add_argument("--global-queries", type=int, default=5, help="global PPR queries timed per size (0: skip)")
    parser.add_argument("--prior-topk", type=int, default=100)
    parser.add_argument("--tol", type=float, default=1e-6)
    parser.add_argument("--workdir", default=None, help="where the CSR files are written (a temporary folder inside)")
    parser.add_argument("--index", help="2wiki stage: the index directory")
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--dataset", default="2wiki", help="2wiki stage: the dataset whose questions are asked")
    parser.add_argument(
        "--variants", nargs="*",
        default=["ppr=local", "ppr=local,prior_topk=100", "ppr=local,prior_topk=100,ann=ivf"],
        help="2wiki stage: graph settings to compare with the exact path (comma-separated key=value)",
    )
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    if args.stage == "synthetic":
        stage_synthetic(args)
    else:
        stage_2wiki(args)


if __name__ == "__main__":
    main()
