"""Graph benchmarks: build cost and retrieval quality/latency of the HippoRAG 2 graph.

    python3 benchmarks/bench_graph.py                      # both stages, default sizes
    python3 benchmarks/bench_graph.py --stage musique      # MuSiQue-100, precomputed OpenIE
    python3 benchmarks/bench_graph.py --stage build-2wiki --limit 2000

Stages run in child processes so that each one's peak RSS is measured on its own
(``ru_maxrss`` of the child). Indexes go to ``--workdir`` (default: a temporary folder) and are
reused when present, so re-running a stage measures retrieval without rebuilding.

* ``musique``: builds the graph over the 1,890-passage MuSiQue corpus from the released
  gpt-3.5-turbo OpenIE file, then for its 100 questions reports recall@2/@5 of the supporting
  paragraphs for passage (dense over the same vectors), graph (PPR) and hybrid (RRF), and graph
  latency: p50 single-query calls (with and without the query embedding) and the per-query share
  of one batched call.
* ``build-2wiki``: spaCy OpenIE + graph over the 2Wiki corpus (``--limit`` passages): wall time,
  peak RSS, graph size; then graph p50 latency over 100 2Wiki questions.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MUSIQUE_OPENIE = "musique_train100/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json"


def _load_or_build(directory: Path, docs, settings):
    from routerag.index.docstore import DocStore
    from routerag.index.graph import GraphIndex

    store = DocStore(docs)
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    if (directory / "manifest.json").is_file():
        graph = GraphIndex.load(directory, store, settings)
        built = False
    else:
        graph = GraphIndex.build(store, directory, settings)
        built = True
    # CPU seconds as well as wall time: on a shared machine wall time mostly measures the neighbours
    return graph, time.perf_counter() - t0, time.process_time() - cpu0, built


def _recall(found: list[str], gold: list[str]) -> float:
    return sum(g in found for g in gold) / len(gold) if gold else 0.0


def _p50_single(source, queries: list[str], k: int) -> float:
    times = []
    for q in queries:
        t0 = time.perf_counter()
        source.search([q], k)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def stage_musique(workdir: Path, n_latency: int) -> dict:
    from routerag.corpus.datasets import data_root
    from routerag.corpus.loaders import load_corpus, load_questions
    from routerag.index.settings import GraphSettings, IndexSettings
    from routerag.sources.graph import GraphPassageSource, GraphSource
    from routerag.sources.hybrid import HybridSource

    root = data_root() / "musique_train100"
    docs = load_corpus(root / "musique_train_corpus.json").docs
    questions = [q for q in load_questions(root / "musique_train.json") if q.supporting_doc_ids]
    settings = IndexSettings(graph=GraphSettings(extractor="precomputed", openie_file=MUSIQUE_OPENIE))
    graph, seconds, cpu_s, built = _load_or_build(workdir / "musique-graph", docs, settings)
    passage, graph_src = GraphPassageSource(graph), GraphSource(graph)
    hybrid = HybridSource(passage, graph_src)
    queries = [q.question for q in questions]
    out: dict = {"stage": "musique", "built": built, "build_or_load_s": round(seconds, 1), "build_or_load_cpu_s": round(cpu_s, 1), **graph.stats()}
    graph_results = graph_src.search(queries, 5)
    out["graph_fallbacks"] = sum(r.metadata["fallback"] == "dense" for r in graph_results)
    for name, results in (
        ("passage", passage.search(queries, 5)),
        ("graph", graph_results),
        ("hybrid", hybrid.search(queries, 5)),
    ):
        for k in (2, 5):
            out[f"{name}_recall@{k}"] = round(
                statistics.mean(_recall([h.doc_id for h in r.hits[:k]], q.supporting_doc_ids) for r, q in zip(results, questions)), 4
            )
    sample = queries[:n_latency]
    graph_src.search(sample[:2], 5)  # warm-up
    out["graph_p50_single_ms"] = round(_p50_single(graph_src, sample, 5), 2)
    vectors = graph.embed_queries(sample)
    times = []
    for i, q in enumerate(sample):
        t0 = time.perf_counter()
        graph_src.rank([q], 5, vectors[i : i + 1])
        times.append((time.perf_counter() - t0) * 1000)
    out["graph_p50_single_no_embed_ms"] = round(statistics.median(times), 2)
    batch = graph_src.search(sample, 5)
    out["graph_batched_per_query_ms"] = round(batch[0].latency_ms, 2)
    out["passage_p50_single_ms"] = round(_p50_single(passage, sample, 5), 2)
    return out


def stage_build_2wiki(workdir: Path, limit: int, n_latency: int) -> dict:
    from routerag.corpus.datasets import data_root
    from routerag.corpus.loaders import load_corpus, load_questions
    from routerag.index.settings import GraphSettings, IndexSettings
    from routerag.sources.graph import GraphSource

    root = data_root() / "2wikimultihopqa"
    docs = load_corpus(root / "2wikimultihopqa_corpus.json").docs[:limit]
    settings = IndexSettings(graph=GraphSettings(extractor="spacy"))
    graph, seconds, cpu_s, built = _load_or_build(workdir / f"2wiki-spacy-{limit}", docs, settings)
    out: dict = {"stage": "build-2wiki", "built": built, "build_or_load_s": round(seconds, 1), "build_or_load_cpu_s": round(cpu_s, 1), **graph.stats()}
    questions = [q.question for q in load_questions(root / "2wikimultihopqa_questions.jsonl")][:n_latency]
    source = GraphSource(graph)
    source.search(questions[:2], 5)
    out["graph_p50_single_ms"] = round(_p50_single(source, questions, 5), 2)
    vectors = graph.embed_queries(questions)
    times = []
    for i, q in enumerate(questions):
        t0 = time.perf_counter()
        source.rank([q], 5, vectors[i : i + 1])
        times.append((time.perf_counter() - t0) * 1000)
    out["graph_p50_single_no_embed_ms"] = round(statistics.median(times), 2)
    out["graph_batched_per_query_ms"] = round(source.search(questions, 5)[0].latency_ms, 2)
    return out


def run_child(args: list[str]) -> dict:
    """Run one stage in a child process; returns its JSON result (with the child's own peak RSS)."""
    proc = subprocess.run([sys.executable, __file__, *args, "--child"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"stage {args} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", choices=["all", "musique", "build-2wiki"], default="all")
    parser.add_argument("--workdir", type=Path, default=None, help="where graphs are built / reused")
    parser.add_argument("--limit", type=int, default=6119, help="2Wiki passages to index")
    parser.add_argument("--latency-queries", type=int, default=100)
    parser.add_argument("--torch-threads", type=int, default=0, help="torch.set_num_threads in the stage (0: torch's default)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench_graph-"))
    workdir.mkdir(parents=True, exist_ok=True)

    if args.child:
        if args.torch_threads:
            import torch

            torch.set_num_threads(args.torch_threads)
        if args.stage == "musique":
            result = stage_musique(workdir, args.latency_queries)
        else:
            result = stage_build_2wiki(workdir, args.limit, args.latency_queries)
        result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # this child only
        print(json.dumps(result))
        return

    stages = ["musique", "build-2wiki"] if args.stage == "all" else [args.stage]
    results = []
    for stage in stages:
        child_args = ["--stage", stage, "--workdir", str(workdir), "--limit", str(args.limit), "--latency-queries", str(args.latency_queries), "--torch-threads", str(args.torch_threads)]
        results.append(run_child(child_args))
    for result in results:
        print(f"\n## {result.pop('stage')}")
        print("| metric | value |\n|---|---|")
        for key, value in result.items():
            print(f"| {key} | {value} |")
    print(f"\nworkdir: {workdir}")


if __name__ == "__main__":
    main()
