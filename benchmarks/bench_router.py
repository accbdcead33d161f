"""The learned router against fixed choices, the profile-embedding router and the oracle.

Prints markdown tables (docs/concepts/routing.md):

1. mode routing on held-out hops of the training label files (cross-validated, folds grouped by
   question): accuracy (the chosen mode ranks the hop's gold paragraph in the top k) and mean
   cost at each cost margin; always-<mode>; profile-embedding over the RouteRAG prompt's mode
   descriptions; the oracle; per label file;
2. retrieval recall@5 on evaluation questions (never in the labels): 2Wiki-100 (gold answer string
   in the top 5), MuSiQue-50 and the HotpotQA distractor test-100 (share of supporting paragraphs
   in the top 5; all evenly spaced), the question searched once in the learned router's mode
   (one or several router models, on the same results) vs each fixed mode vs the per-question best
   mode, with the mean per-query cost (the rewards' mode cost and the measured retrieval ms) and the
   issue's target checked;
3. source routing: law-med (all 400, learned cross-validated by question) and 2Wiki local/global
   (labels from outcomes), learned vs profile-embedding vs always-one-source vs the oracle;
4. router latency (given the query embedding, and with it; per query and per batch of 32) and
   training time;
5. (``--parts signals``, not in the default) how far post-retrieval signals go: a router that has
   run every mode, cross-validated on the evaluation questions themselves (an upper bound), and
   reciprocal-rank fusions of the modes;
6. (``--parts llm``, not in the default) the LLM router (the bundled 0.5B) on the hops of part 1,
   the modes listed in both orders.

    python3 benchmarks/bench_router.py                       # everything (indexes are built on first use)
    python3 benchmarks/bench_router.py --parts cv,sources     # no retrieval index needed
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from routerag.eval.bootstrap import paired_bootstrap
from routerag.routing.learned import LearnedRouter, cost_aware_choice, resolve_model, shipped_dir
from routerag.train.router.fit import cross_validate, design_matrix, embed_queries
from routerag.train.router.labels import RouteLabel, answer_source_labels, gold_source_labels, read_labels

MODE_PROFILES = {  # the RouteRAG prompt's descriptions of its modes
    "passage": "find documents using semantic similarity-based dense retrieval",
    "bm25": "find documents by keyword matching (BM25 lexical retrieval)",
    "graph": "find documents through graph-based retrieval on a knowledge graph built from documents, using fact ranking and graph reasoning",
    "hybrid": "find documents with both graph-based and dense retrieval combined",
}


def table(cols: list[str], rows: list[list[str]]) -> None:
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(cols))) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()


def profile_choices(queries: list[str], profiles: dict[str, str], embedder) -> list[str]:
    names = list(profiles)
    q = embed_queries(queries, embedder)
    p = embed_queries([profiles[n] for n in names], embedder)
    q /= np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
    p /= np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1e-12)
    return [names[i] for i in (q @ p.T).argmax(axis=1)]


def accuracy_of(chosen: list[str], rows: list[RouteLabel]) -> float:
    return sum(r.success.get(c, False) for c, r in zip(chosen, rows)) / len(rows)


# ---------------------------------------------------------------- 1. mode routing, cross-validated


def part_cv(label_dir: Path, embedder, margins: list[float], k: int | None = None) -> None:
    files = sorted(label_dir.glob("mode-*.jsonl.gz"))
    if not files:
        print(f"(no mode label files in {label_dir}: run `routerag router labels`)\n")
        return
    rows, prov = [], []
    for f in files:
        p, r = read_labels(f)
        prov.append(p)
        rows += r
    labels = list(prov[0].choices)
    if k is not None:  # relabel from the recorded gold ranks: success = gold within the top k
        rows = [r.model_copy(update={"success": {m: r.rank.get(m) is not None and r.rank[m] <= k for m in labels}}) for r in rows]
        prov = [p.model_copy(update={"k": k}) for p in prov]
    costs = {m: float(prov[0].mode_cost.get(m, 1.0)) for m in labels}
    queries = [r.query for r in rows]
    t0 = time.perf_counter()
    emb = embed_queries(queries, embedder)
    embed_s = time.perf_counter() - t0
    x = design_matrix(queries, emb)
    y = np.array([[r.success[m] for m in labels] for r in rows], dtype=bool)
    groups = np.array([f"{r.dataset}:{r.qid}" for r in rows])
    t0 = time.perf_counter()
    cv, probs = cross_validate(x, y, groups, labels, costs, folds=5, margins=margins)
    cv_s = time.perf_counter() - t0
    wall = {m: statistics.fmean(r.wall_ms[m] for r in rows) for m in labels}
    datasets = sorted({r.dataset for r in rows})
    print(f"## Mode routing on held-out hops ({len(rows)} hops, {len(set(groups))} training questions of "
          f"{', '.join(datasets)}; k={prov[0].k}; 5-fold CV grouped by question; embedding {embed_s:.1f} s, CV {cv_s:.2f} s)\n")
    prof = profile_choices(queries, {m: MODE_PROFILES[m] for m in labels}, embedder)

    def wall_of(chosen):
        return statistics.fmean(r.wall_ms[c] for c, r in zip(chosen, rows))

    def cost_of(chosen):
        return statistics.fmean(costs[c] for c in chosen)

    def by_ds(chosen):
        return [f"{accuracy_of([c for c, r in zip(chosen, rows) if r.dataset == d], [r for r in rows if r.dataset == d]):.3f}" for d in datasets]

    out = []
    for m in labels:
        chosen = [m] * len(rows)
        out.append([f"always {m}", f"{accuracy_of(chosen, rows):.3f}", *by_ds(chosen), f"{cost_of(chosen):.2f}", f"{wall[m]:.2f}"])
    out.append(["profile-embedding (mode descriptions)", f"{accuracy_of(prof, rows):.3f}", *by_ds(prof), f"{cost_of(prof):.2f}", f"{wall_of(prof):.2f}"])
    for margin in margins:
        chosen = [cost_aware_choice(dict(zip(labels, p)), costs, margin) for p in probs]
        out.append([f"learned, margin {margin:g}", f"{accuracy_of(chosen, rows):.3f}", *by_ds(chosen), f"{cost_of(chosen):.2f}", f"{wall_of(chosen):.2f}"])
    oracle = [min((m for m in labels if r.success[m]), key=lambda m: costs[m], default=labels[0]) for r in rows]
    out.append(["oracle (cheapest successful mode)", f"{accuracy_of(oracle, rows):.3f}", *by_ds(oracle), f"{cost_of(oracle):.2f}", f"{wall_of(oracle):.2f}"])
    table(["router", "accuracy", *[f"acc. {d}" for d in datasets], "mean mode cost", "mean retrieval ms"], out)
    shares = {f"{m:g}": cv["learned"][f"{m:g}"]["share"] for m in margins}
    print("Learned router's choices by margin: " + "; ".join(f"{m}: " + ", ".join(f"{k} {v:.2f}" for k, v in s.items()) for m, s in shares.items()) + "\n")


# ---------------------------------------------------------------- 2. recall@5 on evaluation questions


def _recall_rows(dataset: str, n: int):
    from routerag.corpus.datasets import load_dataset
    from routerag.corpus.normalize import normalize_answer
    from routerag.run.assemble import build_sources
    from routerag.run.config import RunConfig

    data = load_dataset(dataset)
    sources, _ = build_sources(data, RunConfig(dataset=dataset, components=["dense", "bm25", "graph"]))
    questions = data.sample(n).questions
    support = dataset != "2wiki"
    if support:
        questions = [q for q in questions if q.supporting_doc_ids]

    def score(q, hits) -> float:
        if support:
            gold = set(q.supporting_doc_ids)
            return len(gold & {h.doc_id for h in hits[:5]}) / len(gold)
        golds = [g for g in (normalize_answer(a) for a in q.answers) if g]
        texts = [f" {normalize_answer(f'{h.title} {h.text}')} " for h in hits[:5]]
        return float(any(f" {g} " in t for g in golds for t in texts))

    return data, sources, questions, score


def target_check(rec: float, cost: float, oracle: float, hybrid_cost: float) -> str:
    """The issue's target: within 5 points of the oracle's recall@5 at <= 60 % of always-hybrid's cost."""
    gap, share = oracle - rec, cost / hybrid_cost if hybrid_cost else float("inf")
    met = gap <= 0.05 + 1e-9 and share <= 0.60 + 1e-9
    where = f"{100 * gap:.1f} points below" if gap >= 0 else f"{-100 * gap:.1f} points above"
    return f"{'met' if met else 'not met'} ({where} the oracle, {100 * share:.0f} % of hybrid's cost)"


def part_recall(margins: list[float], datasets: list[str], models: list[str] | None = None) -> None:
    """Each set's questions searched once per mode; every router model in ``models`` (a shipped
    name or a model folder) is scored on the same results, so the models are compared on equal terms."""
    routers = [LearnedRouter.load(resolve_model(m, [])) for m in (models or ["mode"])]
    modes = routers[0].manifest.labels
    costs = routers[0].manifest.mode_cost
    for r in routers[1:]:
        if r.manifest.labels != modes or r.manifest.mode_cost != costs:
            raise SystemExit(f"router {r.model_path}: labels/costs differ from {routers[0].model_path}; compare like with like")
    for spec in datasets:
        name, _, n = spec.partition(":")
        data, sources, questions, score = _recall_rows(name, int(n))
        queries = [q.question for q in questions]
        results, wall = {}, {}
        for m in modes:
            sources.search(queries[:1], 5, [m])  # warm-up: loading the embedder or the graph is not timed
            res = []
            for start in range(0, len(queries), 32):
                res += sources.search(queries[start:start + 32], 5, [m]).results[m]
            results[m] = res
            wall[m] = [r.latency_ms for r in res]
        scores = {m: [score(q, r.hits) for q, r in zip(questions, results[m])] for m in modes}
        best = [max(modes, key=lambda m: (scores[m][i], -costs.get(m, 1.0))) for i in range(len(questions))]
        oracle = statistics.fmean(scores[c][i] for i, c in enumerate(best))
        hybrid_cost = costs.get("hybrid", max(costs.values()))
        what = "supporting-paragraph recall@5" if name != "2wiki" else "answer recall@5"
        print(f"## Retrieval on {name}-{n} evaluation questions ({len(questions)} with gold; {what}; the question searched once)\n")
        out = []
        for m in modes:
            out.append([f"always {m}", f"{statistics.fmean(scores[m]):.3f}", f"{costs.get(m, 1.0):.2f}", f"{statistics.fmean(wall[m]):.2f}"])
        checks, paired = [], []
        first: dict[float, list[float]] = {}  # the first model's per-question recall at each margin
        for r_index, router in enumerate(routers):
            probs = router.predict(queries)
            label = "learned" if len(routers) == 1 else f"learned `{router.manifest.name}` ({router.manifest.rows} hops)"
            for margin in margins:
                chosen = [cost_aware_choice(dict(zip(modes, p)), costs, margin) for p in probs]
                per_q = [scores[c][i] for i, c in enumerate(chosen)]
                if r_index == 0:
                    first[margin] = per_q
                else:
                    d = paired_bootstrap(first[margin], per_q)
                    paired.append(f"{label} - `{routers[0].manifest.name}`, margin {margin:g}: {d.diff:+.3f} "
                                  f"[{d.low:+.3f}, {d.high:+.3f}], p = {d.p_value:.2f}")
                rec = statistics.fmean(per_q)
                cost = statistics.fmean(costs.get(c, 1.0) for c in chosen)
                ms = statistics.fmean(wall[c][i] for i, c in enumerate(chosen))
                share = ", ".join(f"{m} {sum(c == m for c in chosen) / len(chosen):.2f}" for m in modes)
                out.append([f"{label}, margin {margin:g} ({share})", f"{rec:.3f}", f"{cost:.2f}", f"{ms:.2f}"])
                checks.append(f"{label}, margin {margin:g}: {target_check(rec, cost, oracle, hybrid_cost)}")
        out.append(["oracle (best mode per question, cheapest on ties)", f"{oracle:.3f}",
                    f"{statistics.fmean(costs.get(c, 1.0) for c in best):.2f}", f"{statistics.fmean(wall[c][i] for i, c in enumerate(best)):.2f}"])
        table(["mode choice", "recall@5", "mean mode cost", "mean retrieval ms"], out)
        print("Target (within 5 points of the oracle at <= 60 % of always-hybrid's cost):\n")
        print("\n".join(f"* {c}" for c in checks) + "\n")
        if paired:
            print(f"Paired recall@5 difference against `{routers[0].manifest.name}` at the same margin (mean, 95 % "
                  "bootstrap CI over questions, two-sided p):\n")
            print("\n".join(f"* {c}" for c in paired) + "\n")


def _signal_features(lists: dict[str, list], modes: list[str]) -> list[float]:
    """Post-retrieval signals of one question: per mode its top-1 score and the top-1 - top-2 and
    top-1 - top-5 gaps; per pair of modes the overlap of their top 5."""
    import itertools

    out: list[float] = []
    for m in modes:
        s = [h.score for h in lists[m]] + [0.0] * 5
        out += [s[0], s[0] - s[1], s[0] - s[4]]
    for a, b in itertools.combinations(modes, 2):
        out.append(len({h.doc_id for h in lists[a][:5]} & {h.doc_id for h in lists[b][:5]}) / 5)
    return out


def rrf_top5(ranked: list[list]) -> list:
    """The top 5 of a reciprocal-rank fusion (k = 60) of ranked hit lists."""
    weight: dict[str, float] = {}
    hits = {}
    for hits_of_mode in ranked:
        for r, h in enumerate(hits_of_mode):
            weight[h.doc_id] = weight.get(h.doc_id, 0.0) + 1.0 / (60 + r + 1)
            hits.setdefault(h.doc_id, h)
    return [hits[d] for d in sorted(weight, key=lambda d: -weight[d])[:5]]


def part_signals(datasets: list[str], folds: int = 5, repeats: int = 5) -> None:
    """How far retrieval signals go: a router that has *run every mode* (cost 9, so no router one
    would deploy) and reads their scores and agreements, cross-validated on the evaluation questions
    themselves (in distribution: an upper bound for a router trained elsewhere), against the best
    fixed mode and the oracle; and the recall@5 of reciprocal-rank fusions of the modes' top 5
    (cost = the sum of the fused modes' costs). If this router does not come near the oracle, no
    router reading these signals or the query alone will."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import KFold

    modes = ["passage", "bm25", "graph", "hybrid"]
    for spec in datasets:
        name, _, n = spec.partition(":")
        data, sources, questions, score = _recall_rows(name, int(n))
        queries = [q.question for q in questions]
        lists: dict[str, list] = {}
        for m in modes:
            res = []
            for start in range(0, len(queries), 32):
                res += sources.search(queries[start:start + 32], 5, [m]).results[m]
            lists[m] = [r.hits for r in res]
        recall = np.array([[score(q, lists[m][i]) for m in modes] for i, q in enumerate(questions)])
        feats = np.array([_signal_features({m: lists[m][i] for m in modes}, modes) for i in range(len(questions))])
        feats = (feats - feats.mean(0)) / (feats.std(0) + 1e-9)
        picked = []
        for seed in range(repeats):
            pred = np.zeros_like(recall)
            for train, test in KFold(folds, shuffle=True, random_state=seed).split(feats):
                for j in range(len(modes)):
                    y = recall[train, j] >= 0.5
                    if y.all() or not y.any():
                        pred[test, j] = y.mean()
                        continue
                    pred[test, j] = LogisticRegression(C=1.0, max_iter=2000).fit(feats[train], y).predict_proba(feats[test])[:, 1]
            picked.append(float(recall[np.arange(len(recall)), pred.argmax(1)].mean()))

        costs = LearnedRouter.load(resolve_model("mode", [])).manifest.mode_cost  # the rewards' prices, as part 2
        print(f"## Retrieval signals on {name}-{n} ({len(questions)} questions; recall@5 as in part 2)\n")
        rows = [[f"always {m}", f"{recall[:, j].mean():.3f}", f"{costs[m]:.0f}"] for j, m in enumerate(modes)]
        for names in (["passage", "bm25"], ["passage", "graph"], ["passage", "bm25", "graph"]):
            fused = [score(q, rrf_top5([lists[m][i] for m in names])) for i, q in enumerate(questions)]
            rows.append([f"RRF fusion of {' + '.join(names)}", f"{statistics.fmean(fused):.3f}",
                         f"{sum(costs[m] for m in names):.0f}"])
        rows.append([f"router on every mode's signals ({folds}-fold CV on these questions, mean of {repeats})",
                     f"{statistics.fmean(picked):.3f}", "9"])
        rows.append(["oracle (best mode per question)", f"{recall.max(1).mean():.3f}", ""])
        table(["choice", "recall@5", "mode cost"], rows)
        aucs = []
        for j, m in enumerate(modes):
            y = recall[:, j] >= 0.5
            if 0 < y.sum() < len(y):
                aucs.append(f"{m} {roc_auc_score(y, feats[:, 3 * j]):.2f}")
        print("AUC of a mode's own top-1 score for its success (recall >= 0.5): " + ", ".join(aucs) + "\n")


# ---------------------------------------------------------------- 3. source routing


SOURCE_SETS = {"law-med": lambda: gold_source_labels("law-med", eval_sets=()),
               "2wiki-multisource": lambda: answer_source_labels("2wiki-multisource", eval_sets=())}


def part_sources(embedder, sets: list[str]) -> None:
    from routerag.corpus.datasets import load_dataset

    print("## Source routing\n")
    out = []
    for dataset in sets:
        build = SOURCE_SETS[dataset]
        prov, rows = build()
        names = list(prov.choices)
        profiles = {n: s.profile for n, s in load_dataset(dataset).sources.items()}
        queries = [r.query for r in rows]
        emb = embed_queries(queries, embedder)
        x = design_matrix(queries, emb)
        y = np.array([[r.success[n] for n in names] for r in rows], dtype=bool)
        groups = np.array([r.qid for r in rows])
        _, probs = cross_validate(x, y, groups, names, {}, folds=5, margins=[0.0])
        learned = [names[int(np.argmax(p))] for p in probs]
        prof = profile_choices(queries, profiles, embedder)
        answerable = [i for i, r in enumerate(rows) if any(r.success.values())]
        sub = [rows[i] for i in answerable]

        def acc(chosen, answerable=answerable, sub=sub):
            return accuracy_of([chosen[i] for i in answerable], sub)

        label = f"{dataset} ({len(rows)} questions; {len(sub)} with a successful source)"
        for n in names:
            out.append([label, f"always {n}", f"{acc([n] * len(rows)):.3f}"])
        out.append([label, "profile-embedding", f"{acc(prof):.3f}"])
        out.append([label, "learned (5-fold CV by question)", f"{acc(learned):.3f}"])
        out.append([label, "oracle", "1.000"])
    table(["set", "router", "accuracy (questions with a successful source)"], out)


# ---------------------------------------------------------------- 5. the LLM router on mode choice


def part_llm(label_dir: Path, n_rows: int, threads: int) -> None:
    """The papers' router (one call of the bundled 0.5B over the modes' descriptions) on the same
    hops as part 1 (evenly spaced), the modes listed in the prompt's order and reversed: accuracy
    against the hops' labels, the share of each mode chosen, format errors and ms per call."""
    from routerag.corpus.sampling import evenly_spaced
    from routerag.llm.base import GenerationParams
    from routerag.llm.config import ModelConfig
    from routerag.llm.factory import build_model
    from routerag.routing.llm import LLMRouter
    from routerag.runtime.base import StrategyContext
    from routerag.sources.sourceset import SourceSet

    rows = []
    for f in sorted(label_dir.glob("mode-*.jsonl.gz")):
        rows += read_labels(f)[1]
    rows = evenly_spaced(rows, n_rows)
    labels = [m for m in MODE_PROFILES if m in rows[0].success]
    router = LLMRouter(StrategyContext(model=build_model(ModelConfig(n_threads=threads)), sources=SourceSet()),
                       GenerationParams(max_tokens=64, temperature=0.0))
    out = []
    for order, names in (("listed", labels), ("reversed", labels[::-1])):
        profiles = {m: MODE_PROFILES[m] for m in names}
        chosen, errors, ms = [], 0, []
        for r in rows:
            t0 = time.perf_counter()
            result = router.route(r.query, profiles)
            ms.append(1000 * (time.perf_counter() - t0))
            chosen.append(result.choice)
            errors += bool(result.format_error)
        share = ", ".join(f"{m} {chosen.count(m) / len(chosen):.2f}" for m in names)
        out.append([f"llm router, modes {order} ({', '.join(names)})", f"{accuracy_of(chosen, rows):.3f}", share,
                    str(errors), f"{statistics.median(ms):.0f}"])
    for m in labels:
        out.append([f"always {m}", f"{accuracy_of([m] * len(rows), rows):.3f}", "", "", ""])
    print(f"## The LLM router on mode choice ({len(rows)} hops, evenly spaced over {label_dir.name}'s mode label files; "
          f"bundled 0.5B, greedy, {threads} llama.cpp thread(s))\n")
    table(["router", "accuracy", "share chosen", "format errors", "p50 ms per call"], out)


# ---------------------------------------------------------------- 4. latency and training time


def part_latency(embedder, model: str = "mode") -> None:
    from routerag.corpus.datasets import load_dataset

    router = LearnedRouter.load(resolve_model(model, []), embedder=embedder)
    queries = [q.question for q in load_dataset("2wiki").sample(320).questions]
    emb = embed_queries(queries, embedder)
    choices = {m: "" for m in router.manifest.labels}
    router.route(queries[0], choices)  # warm-up
    given, full = [], []
    for q, e in zip(queries, emb):
        t0 = time.perf_counter()
        router.decide(router.predict([q], e[None, :])[0], list(choices))
        given.append(1000 * (time.perf_counter() - t0))
        t0 = time.perf_counter()
        router.route(q, choices)
        full.append(1000 * (time.perf_counter() - t0))
    batch_given, batch_full = [], []
    for start in range(0, len(queries), 32):
        chunk = queries[start:start + 32]
        t0 = time.perf_counter()
        probs = router.predict(chunk, emb[start:start + 32])
        [router.decide(p, list(choices)) for p in probs]
        batch_given.append(1000 * (time.perf_counter() - t0))
        t0 = time.perf_counter()
        router.route_batch(chunk, list(choices))
        batch_full.append(1000 * (time.perf_counter() - t0))
    print(f"## Router latency (`{router.manifest.name}`, {router.manifest.rows} hops; {len(queries)} 2Wiki questions, "
          "one process, shared loaded machine)\n")
    table(["what", "p50 ms per query", "p50 ms per batch of 32"], [
        ["learned router, given the query embedding", f"{statistics.median(given):.3f}", f"{statistics.median(batch_given):.2f}"],
        ["learned router, with the query embedding", f"{statistics.median(full):.2f}", f"{statistics.median(batch_full):.2f}"],
    ])
    rows = []
    for path in sorted(shipped_dir().glob("*/manifest.json")):
        r = LearnedRouter.load(path.parent)
        m = r.manifest
        rows.append([m.name, str(m.rows), str(m.questions), f"{m.train_seconds:.2f}", f"{m.cv.get('seconds', 0):.2f}",
                     f"{m.cv.get('embed_seconds', 0):.1f}", f"{m.cv['learned']['0']['accuracy']:.3f}", f"{m.cv['oracle']['accuracy']:.3f}"])
    print("## Shipped routers (from their manifests)\n")
    table(["router", "rows", "questions", "fit s", "CV s", "embedding s", "CV accuracy", "oracle"], rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="cv,recall,sources,latency")
    ap.add_argument("--labels", type=Path, default=shipped_dir() / "labels")
    ap.add_argument("--margins", default="0,0.05,0.1,0.2,0.3")
    ap.add_argument("-k", type=int, default=None, help="cv: success = gold within the top k (from the labels' recorded ranks)")
    ap.add_argument("--recall-sets", default="2wiki:100,musique:50,hotpotqa-distractor:100")
    ap.add_argument("--model", default="mode", help="recall, latency: the mode router(s), comma-separated (a shipped name or a "
                    "model folder); recall scores every one on the same search results, latency times the first")
    ap.add_argument("--source-sets", default="law-med,2wiki-multisource", help=f"of {', '.join(SOURCE_SETS)}")
    ap.add_argument("--llm-rows", type=int, default=120, help="llm: hops asked (evenly spaced over the label files)")
    ap.add_argument("--threads", type=int, default=1, help="llm: llama.cpp threads")
    args = ap.parse_args()
    from routerag.index.embedder import build_embedder

    embedder = build_embedder()
    margins = [float(m) for m in args.margins.split(",")]
    parts = args.parts.split(",")
    if "cv" in parts:
        part_cv(args.labels, embedder, margins, args.k)
    if "recall" in parts:
        part_recall(margins, args.recall_sets.split(","), args.model.split(","))
    if "sources" in parts:
        part_sources(embedder, args.source_sets.split(","))
    if "latency" in parts:
        part_latency(embedder, args.model.split(",")[0])
    if "signals" in parts:
        part_signals(args.recall_sets.split(","))
    if "llm" in parts:
        part_llm(args.labels, args.llm_rows, args.threads)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
