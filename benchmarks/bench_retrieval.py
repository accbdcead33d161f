"""Retrieval benchmark: index build time and peak memory per component, load time, recall and
latency per mode, on 2WikiMultihopQA (6,119 passages, 1,000 questions) and MuSiQue-100.

    python3 benchmarks/bench_retrieval.py                      # dense + bm25 (+ graph if available)
    python3 benchmarks/bench_retrieval.py --components dense,bm25 --workdir /tmp/bench

Each component is built in its own fresh Python process, so its wall time and peak RSS
(``ru_maxrss``) are that component's alone (plus the interpreter and its imports); the spaCy
extractor's worker processes are reported as their own peak (they run beside the parent).
Prints markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from routerag.sources.registry import bundle_sources

TARGETS = {"build_s": 300.0, "peak_gib": 2.0, "load_s": 3.0, "p50_ms": 10.0, "batch_speedup": 3.0, "graph_p50_ms": 30.0}

_CHILD = textwrap.dedent(
    """
    import json, resource, sys, time
    from pathlib import Path
    step, directory, arg = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    t0 = time.perf_counter()
    if step == "first":
        from routerag.config import load_config
        from routerag.corpus.loaders import load_corpus
        from routerag.index.bundle import build_index
        from routerag.index.settings import IndexSettings
        settings = load_config(IndexSettings, None, sys.argv[5:])
        build_index(load_corpus(arg).docs, directory, settings, components=[sys.argv[4]])
    elif step == "more":
        from routerag.index.bundle import load_index
        load_index(directory).add_component(arg)
    elif step == "load":
        t_import = time.perf_counter()
        from routerag.index.bundle import load_index
        import faiss, bm25s  # the heavy imports a load needs, timed separately
        t1 = time.perf_counter()
        bundle = load_index(directory)
        sources = bundle_sources(bundle)
        t2 = time.perf_counter()
        sources.search_one("warm up the model", 1, sources.names()[0])
        t3 = time.perf_counter()
        print(json.dumps({"import_s": t1 - t_import, "load_s": t2 - t1, "first_query_s": t3 - t2}))
        sys.exit(0)
    seconds = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)  # spaCy extraction workers, if any
    print(json.dumps({"seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime + kids.ru_utime + kids.ru_stime,
                      "peak_gib": usage.ru_maxrss / 1024 / 1024, "worker_peak_gib": kids.ru_maxrss / 1024 / 1024}))
    """
)


def _child(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _available_components(wanted: list[str]) -> list[str]:
    from routerag.index.component import COMPONENTS

    out = []
    for name in wanted:
        try:
            COMPONENTS.get(name)
        except ImportError as exc:
            print(f"(skipping component {name}: {exc})", file=sys.stderr)
            continue
        out.append(name)
    return out


def print_builds(rows: list[dict]) -> None:
    if not rows:
        return
    print("\n| component | build wall s | CPU s (incl. workers) | peak RSS GiB | worker peak RSS GiB |\n|---|---:|---:|---:|---:|")
    for row in rows:
        worker = row.get("worker_peak_gib", 0.0)
        print(f"| {row['component']} | {row['seconds']:.1f} | {row['cpu_s']:.1f} | {row['peak_gib']:.2f} "
              f"| {worker:.2f} |" if worker else f"| {row['component']} | {row['seconds']:.1f} | {row['cpu_s']:.1f} "
              f"| {row['peak_gib']:.2f} | - |")


def passage_modes(sources, store, probe: str) -> list[str]:
    """Mounted modes whose hits are the bundle's passages (``triples`` returns facts: no passage recall)."""
    modes = []
    for mode in sources.names():
        hits = sources.search_one(probe, 3, mode).hits
        if hits and all(h.doc_id in store for h in hits):
            modes.append(mode)
        else:
            print(f"(mode {mode}: hits are not corpus passages; left out of recall)", file=sys.stderr)
    return modes


def build_components(corpus: Path, directory: Path, components: list[str], overrides: list[str] = ()) -> list[dict]:
    rows = []
    for i, name in enumerate(components):
        if i == 0:
            stats = _child("first", str(directory), str(corpus), name, *overrides)
        else:
            stats = _child("more", str(directory), name)
        rows.append({"component": name, **stats})
    return rows


def _contains(answer_norm: str, hit_text: str) -> bool:
    from routerag.corpus.normalize import normalize_answer

    return f" {answer_norm} " in f" {normalize_answer(hit_text)} "


def answer_recall(sources, questions, modes: list[str], ks=(2, 5), batch: int = 32) -> dict[str, dict[int, float]]:
    from routerag.corpus.normalize import normalize_answer

    golds = [[normalize_answer(a) for a in q.answers if normalize_answer(a)] for q in questions]
    out: dict[str, dict[int, float]] = {}
    for mode in modes:
        found = {k: 0 for k in ks}
        for start in range(0, len(questions), batch):
            chunk = questions[start : start + batch]
            results = sources.search([q.question for q in chunk], max(ks), [mode]).results[mode]
            for gold, result in zip(golds[start : start + batch], results):
                for k in ks:
                    texts = [f"{h.title} {h.text}" for h in result.hits[:k]]
                    found[k] += any(_contains(g, t) for g in gold for t in texts)
        out[mode] = {k: found[k] / len(questions) for k in ks}
    return out


def support_recall(sources, questions, modes: list[str], ks=(2, 5), batch: int = 32) -> dict[str, dict[int, float]]:
    """HippoRAG-style passage recall@k: the share of a question's supporting paragraphs in the top k."""
    questions = [q for q in questions if q.supporting_doc_ids]
    out: dict[str, dict[int, float]] = {}
    for mode in modes:
        total = {k: 0.0 for k in ks}
        for start in range(0, len(questions), batch):
            chunk = questions[start : start + batch]
            results = sources.search([q.question for q in chunk], max(ks), [mode]).results[mode]
            for q, result in zip(chunk, results):
                gold = set(q.supporting_doc_ids)
                for k in ks:
                    total[k] += len(gold & {h.doc_id for h in result.hits[:k]}) / len(gold)
        out[mode] = {k: total[k] / len(questions) for k in ks}
    return out


def latency(sources, queries: list[str], modes: list[str], k: int = 5, batch: int = 32) -> dict[str, dict[str, float]]:
    out = {}
    for mode in modes:
        source = sources.get(mode)
        source.search(queries[:2], k)  # warm-up
        singles = []
        for q in queries:
            t0 = time.perf_counter()
            source.search([q], k)
            singles.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        for start in range(0, len(queries), batch):
            source.search(queries[start : start + batch], k)
        per_query_batched = (time.perf_counter() - t0) * 1000 / len(queries)
        out[mode] = {
            "p50_ms": statistics.median(singles),
            "mean_ms": statistics.fmean(singles),
            "batched_ms": per_query_batched,
            "speedup": statistics.fmean(singles) / per_query_batched,
        }
    return out


def print_targets(builds: list[dict], load: dict, lat: dict[str, dict[str, float]]) -> None:
    """The 2Wiki targets, measured against their limits (a reused index has no build rows)."""
    rows = []
    if builds:
        total = sum(b["seconds"] for b in builds)
        rows.append(("whole build (" + " + ".join(b["component"] for b in builds) + ") s", total, TARGETS["build_s"], total <= TARGETS["build_s"]))
        peak = max(max(b["peak_gib"], b.get("worker_peak_gib", 0.0)) for b in builds)
        rows.append(("peak RSS per process GiB", peak, TARGETS["peak_gib"], peak <= TARGETS["peak_gib"]))
    rows.append(("load_index + mount s", load["load_s"], TARGETS["load_s"], load["load_s"] <= TARGETS["load_s"]))
    if "passage" in lat:
        p50, speedup = lat["passage"]["p50_ms"], lat["passage"]["speedup"]
        rows.append(("passage p50 single ms", p50, TARGETS["p50_ms"], p50 <= TARGETS["p50_ms"]))
        rows.append(("passage batch speed-up x", speedup, TARGETS["batch_speedup"], speedup >= TARGETS["batch_speedup"]))
    if "graph" in lat:
        p50 = lat["graph"]["p50_ms"]
        rows.append(("graph p50 single ms (no recognition filter)", p50, TARGETS["graph_p50_ms"], p50 <= TARGETS["graph_p50_ms"]))
    print("\n| 2Wiki target | measured | limit | met |\n|---|---:|---:|---|")
    for name, value, limit, met in rows:
        print(f"| {name} | {value:.2f} | {limit:g} | {'yes' if met else 'NO'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--components", default="dense,bm25,graph", help="components to build (graph only if installed)")
    parser.add_argument("--wiki-components", default=None, help="components for 2Wiki if different (e.g. dense,bm25)")
    parser.add_argument("--workdir", type=Path, default=None, help="where to build (default: a temp dir, removed)")
    parser.add_argument("--latency-queries", type=int, default=200)
    parser.add_argument("--skip-musique", action="store_true")
    parser.add_argument("--reuse", action="store_true", help="reuse indexes already built in --workdir (no build rows)")
    parser.add_argument("--torch-threads", type=int, default=None, help="torch.set_num_threads for the query side")
    args = parser.parse_args()
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs\n")
    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)

    from routerag.corpus.datasets import data_root
    from routerag.corpus.loaders import load_corpus, load_questions
    from routerag.index.bundle import load_index

    data = data_root()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="routerag-bench-"))
    components = _available_components([c for c in args.components.split(",") if c])
    wiki_dir = workdir / "2wiki"
    reuse = args.reuse and (wiki_dir / "manifest.json").is_file()
    if not reuse:
        shutil.rmtree(wiki_dir, ignore_errors=True)
    corpus = data / "2wikimultihopqa" / "2wikimultihopqa_corpus.json"
    print(f"## 2WikiMultihopQA ({len(load_corpus(corpus).docs)} passages)\n")

    wiki_components = _available_components(args.wiki_components.split(",")) if args.wiki_components else components
    builds = [] if reuse else build_components(corpus, wiki_dir, wiki_components)
    print_builds(builds)

    load = _child("load", str(wiki_dir), "-")
    print(
        f"\nload (fresh process): imports {load['import_s']:.2f} s, load_index + mount {load['load_s']:.2f} s, "
        f"first query incl. embedder load {load['first_query_s']:.2f} s\n"
    )

    bundle = load_index(wiki_dir)
    sources = bundle_sources(bundle)
    questions = load_questions(data / "2wikimultihopqa" / "2wikimultihopqa_questions.jsonl", dataset="2wiki")
    modes = passage_modes(sources, bundle.store, questions[0].question)
    t0 = time.perf_counter()
    recall = answer_recall(sources, questions, modes)
    recall_s = time.perf_counter() - t0
    lat = latency(sources, [q.question for q in questions[: args.latency_queries]], modes)
    print(f"recall of the gold answer string in the top-k passages, {len(questions)} questions ({recall_s:.1f} s)\n")
    print("| mode | R@2 | R@5 | p50 single ms | mean single ms | per-query in batches of 32 ms | batch speedup |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for mode in modes:
        r, lt = recall[mode], lat[mode]
        print(
            f"| {mode} | {r[2]:.3f} | {r[5]:.3f} | {lt['p50_ms']:.2f} | {lt['mean_ms']:.2f} | "
            f"{lt['batched_ms']:.2f} | {lt['speedup']:.1f}x |"
        )

    if not args.skip_musique:
        mu = data / "musique_train100"
        mu_dir = workdir / "musique"
        mu_reuse = args.reuse and (mu_dir / "manifest.json").is_file()
        if not mu_reuse:
            shutil.rmtree(mu_dir, ignore_errors=True)
        openie = [p.name for p in mu.glob("openie_*.json")]
        mu_overrides = ["graph.extractor=precomputed", f"graph.openie_file={mu / openie[0]}"] if openie else []
        mu_builds = [] if mu_reuse else build_components(mu / "musique_train_corpus.json", mu_dir, components, mu_overrides)
        mu_bundle = load_index(mu_dir)
        mu_sources = bundle_sources(mu_bundle)
        mu_questions = load_questions(mu / "musique_train.json", dataset="musique")
        mu_modes = passage_modes(mu_sources, mu_bundle.store, mu_questions[0].question)
        mu_recall = support_recall(mu_sources, mu_questions, mu_modes)
        n_docs = len(load_corpus(mu / "musique_train_corpus.json").docs)
        print(f"\n## MuSiQue-100 ({n_docs} passages, {len(mu_questions)} questions): supporting-paragraph recall\n")
        print("| mode | R@2 | R@5 |\n|---|---:|---:|")
        for mode in mu_modes:
            print(f"| {mode} | {mu_recall[mode][2]:.3f} | {mu_recall[mode][5]:.3f} |")
        print_builds(mu_builds)

    print(f"\nload average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print_targets(builds, load, lat)
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
