"""Which WikiTableQuestions table layout retrieves better: recall of the gold table in the top k
documents (and, as ``routerag routing-report`` counts, of a gold answer item in the top 5) for evenly spaced ``wtq-train`` questions, every layout indexed over all 2,108 tables
with routerag's own index components (BM25; dense with the bundled all-MiniLM-L6-v2). Retrieval
only, no model. The index folders are temporary.

    nice -n 19 python3 docs/experiments/scripts/wtq_table_layouts.py --questions 300 [--dense]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

LAYOUTS: dict[str, tuple[int | None, int | None]] = {  # name -> (rows per document, max characters)
    "whole table": (None, None), "whole table <= 4000 chars": (None, 4000), "whole table <= 2000 chars": (None, 2000),
    "10 rows": (10, None), "5 rows": (5, None), "1 row": (1, None),
}
KS = (1, 5, 10)


def measure(layout: tuple[int | None, int | None], questions: int, components: list[str], root: Path) -> dict[str, dict[str, float]]:
    from routerag.corpus.datasets import load_dataset
    from routerag.corpus.wikitablequestions import TableLayout, load_tables, table_corpus
    from routerag.corpus.wtq_datasets import wtq_folder
    from routerag.index.bundle import build_index
    from routerag.llm.scripted import rough_token_count
    from routerag.sources.registry import bundle_sources
    from routerag.train.router.labels import answer_rank

    rows, max_chars = layout
    style = "rows" if rows == 1 else "grid"
    corpus = table_corpus(load_tables(wtq_folder()), TableLayout(rows_per_doc=rows, max_chars=max_chars, style=style))
    table_of = {doc_id: table for table, ids in corpus.doc_ids.items() for doc_id in ids}
    sample = load_dataset("wtq-train", n_questions=questions).questions
    t0 = time.perf_counter()
    bundle = build_index(corpus.docs, root / f"rows-{rows}-{max_chars}", components=components)
    built = time.perf_counter() - t0
    sources = bundle_sources(bundle)
    out = {}
    for mode in ("bm25", "passage"):
        if mode not in sources.names():
            continue
        results = sources.get(mode).search([q.question for q in sample], max(KS))
        row: dict[str, float] = {"docs": len(corpus.docs), "build_s": round(built, 1)}
        for k in KS:
            found = [q.metadata["table_id"] in {table_of[h.doc_id] for h in r.hits[:k]} for q, r in zip(sample, results)]
            row[f"R@{k}"] = round(100 * sum(found) / len(found), 1)
        row["answer@5"] = round(100 * sum(answer_rank(r.hits[:5], q.answers) is not None
                                          for q, r in zip(sample, results)) / len(results), 1)
        row["tokens@5"] = round(sum(rough_token_count(" ".join(h.text for h in r.hits[:5])) for r in results) / len(results))
        out[mode] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--dense", action="store_true", help="also dense retrieval (embeds every document: minutes on CPU)")
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help="comma-separated, of: " + ", ".join(LAYOUTS))
    args = parser.parse_args()
    components = ["bm25", "dense"] if args.dense else ["bm25"]
    print("| layout | mode | documents | " + " | ".join(f"R@{k}" for k in KS) + " | answer in top 5 | evidence tokens @5 | build s |")
    print("|---|---|---:|" + "---:|" * (len(KS) + 3))
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.layouts.split(","):
            for mode, row in measure(LAYOUTS[name], args.questions, components, Path(tmp)).items():
                cells = " | ".join(f"{row[f'R@{k}']:.1f}" for k in KS)
                print(f"| {name} | {mode} | {row['docs']:.0f} | {cells} | {row['answer@5']:.1f} | {row['tokens@5']:.0f} | {row['build_s']:.1f} |",
                      flush=True)


if __name__ == "__main__":
    main()
