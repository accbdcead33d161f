#!/usr/bin/env python
"""Regenerate the bundled demo data (``src/routerag/data/demo/``) from the shared benchmark files.

Deterministic: the same shared files always give byte-identical output (no randomness, every
choice ordered by file position). Run from the project root::

    python docs/experiments/scripts/make_demo_data.py            # rewrite src/routerag/data/demo/
    python docs/experiments/scripts/make_demo_data.py --check    # exit 1 if the committed files differ

Two slices, each in its source's own published format (so the demo exercises the real loaders):

* **2WikiMultihopQA** (``2wiki_corpus.json``, ``2wiki_questions.jsonl``): ``N_2WIKI`` questions at
  evenly spaced positions of the 1,000 (moving forward to the next question when one does not
  qualify: yes/no answers are skipped, and the gold answer must occur in the passages kept for
  it). For each question the slice keeps the passages whose titles name entities in the question,
  the passages whose titles those passages mention (the bridge hop), and the ``N_DISTRACTORS``
  passages sharing the most rare words with the question.
* **MuSiQue** (``musique_questions.json``, ``musique_corpus.json``, ``openie_musique.json``): evenly
  spaced questions per hop count with all their paragraphs, and the precomputed OpenIE records of
  exactly those paragraphs (HippoRAG's results format), so a knowledge graph can be built
  without an LLM.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from routerag.corpus.datasets import bundled_data_dir, data_root
from routerag.corpus.loaders import load_corpus
from routerag.corpus.readers import iter_json, iter_jsonl
from routerag.corpus.sampling import evenly_spaced, evenly_spaced_indices
from routerag.corpus.schema import Document

N_2WIKI = 25
N_DISTRACTORS = 12
MAX_BRIDGE = 8  # passages added per question for titles mentioned in its entity passages
MIN_TITLE_CHARS = 4  # shorter titles match too much text to count as an entity mention
MUSIQUE_PER_HOPS = {2: 2, 3: 1, 4: 1}

_WORD = re.compile(r"\w+")
_STOP = frozenset(
    "a an and are as at be by did do does for from has have he her his in is it its of on or she "
    "that the their they this to was were what when where which who whom whose why with film song "
    "born died place date first same both".split()
)


def base_title(title: str) -> str:
    """``"Lloyd (film)"`` -> ``"lloyd"``: the entity name a question would mention."""
    return re.sub(r"\s*\([^)]*\)\s*$", "", title).strip().lower()


def mentions(text: str, phrase: str) -> bool:
    """``phrase`` occurs in ``text`` as whole words (case-insensitive)."""
    text, phrase = text.lower(), phrase.lower()
    if phrase not in text:  # cheap filter before the regex
        return False
    return re.search(r"(?<!\w)" + re.escape(phrase) + r"(?!\w)", text) is not None


class TitleIndex:
    def __init__(self, docs: Sequence[Document]) -> None:
        self.by_base: dict[str, list[int]] = {}
        for i, doc in enumerate(docs):
            base = base_title(doc.title)
            if len(base) >= MIN_TITLE_CHARS:
                self.by_base.setdefault(base, []).append(i)

    def mentioned_in(self, text: str) -> list[int]:
        """Doc positions whose base title is mentioned in ``text``, in corpus order."""
        return sorted(i for base, rows in self.by_base.items() if mentions(text, base) for i in rows)


def tokens(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1]


def top_overlap(question: str, doc_words: Sequence[set[str]], idf: dict[str, float], k: int, exclude: set[int]) -> list[int]:
    """The ``k`` passages sharing the most rare words (idf-weighted) with the question; ties by position."""
    q = set(tokens(question))
    scored = []
    for i, words in enumerate(doc_words):
        if i in exclude:
            continue
        score = sum(idf[w] for w in q & words)
        if score > 0:
            scored.append((-score, i))
    return [i for _, i in sorted(scored)[:k]]


def slice_2wiki(corpus: list[Document], records: list[dict[str, Any]], n: int) -> tuple[list[tuple[int, dict]], list[int]]:
    """(chosen (position, record) pairs, kept corpus positions)."""
    titles = TitleIndex(corpus)
    doc_words = [set(tokens(doc.passage)) for doc in corpus]
    df = Counter(w for words in doc_words for w in words)
    idf = {w: math.log(len(corpus) / c) for w, c in df.items()}
    starts = evenly_spaced_indices(len(records), n)
    chosen: list[tuple[int, dict]] = []
    kept: set[int] = set()
    for slot, start in enumerate(starts):
        end = starts[slot + 1] if slot + 1 < len(starts) else len(records)
        for pos in range(start, end):  # the first qualifying question in this slot's stride
            rec = records[pos]
            answer = rec["answer"].strip()
            if answer.lower() in {"yes", "no"}:
                continue
            entities = titles.mentioned_in(rec["question"])
            if not entities:
                continue
            bridge = [j for i in entities for j in titles.mentioned_in(corpus[i].text) if j not in entities]
            bridge = list(dict.fromkeys(bridge))[:MAX_BRIDGE]
            gold = entities + bridge
            if not any(mentions(corpus[i].passage, answer) for i in gold):
                continue
            distractors = top_overlap(rec["question"], doc_words, idf, N_DISTRACTORS, set(gold))
            chosen.append((pos, rec))
            kept.update(gold + distractors)
            break
    return chosen, sorted(kept)


def slice_musique(records: list[dict[str, Any]], per_hops: dict[int, int]) -> list[dict[str, Any]]:
    by_hops: dict[int, list[dict[str, Any]]] = {}
    for rec in records:
        by_hops.setdefault(len(rec["question_decomposition"]), []).append(rec)
    chosen_ids = {rec["id"] for hops, k in per_hops.items() for rec in evenly_spaced(by_hops.get(hops, []), k)}
    return [rec for rec in records if rec["id"] in chosen_ids]  # file order


def json_list(records: list[Any]) -> str:
    """One record per line: readable diffs, still a plain JSON list."""
    return "[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n]\n"


def build(root: Path) -> dict[str, str]:
    """File name -> content of every generated demo file."""
    out: dict[str, str] = {}

    # --- 2WikiMultihopQA
    wiki_dir = root / "2wikimultihopqa"
    corpus, _ = load_corpus(wiki_dir / "2wikimultihopqa_corpus.json", "hipporag")
    records = [rec for _, rec in iter_jsonl(wiki_dir / "2wikimultihopqa_questions.jsonl")]
    chosen, kept = slice_2wiki(corpus, records, N_2WIKI)
    out["2wiki_corpus.json"] = json_list([{"title": corpus[i].title, "text": corpus[i].text} for i in kept])
    # "id" keeps each question's position in the full set (the qid the "2wiki" dataset gives it)
    out["2wiki_questions.jsonl"] = "".join(
        json.dumps({"id": f"2wiki-{pos}", **rec}, ensure_ascii=False) + "\n" for pos, rec in chosen
    )

    # --- MuSiQue with its OpenIE records
    mq_dir = root / "musique_train100"
    mq_records = [rec for _, rec in iter_json(mq_dir / "musique_train.json")]
    mq = slice_musique(mq_records, MUSIQUE_PER_HOPS)
    paragraphs = list(dict.fromkeys((p["title"], p["paragraph_text"]) for rec in mq for p in rec["paragraphs"]))
    wanted = set(paragraphs)
    openie_path = next(iter(sorted(mq_dir.glob("openie_musique_train*.json"))))
    openie_docs = []
    for where, value in iter_json(openie_path):
        if where.key == "docs":
            openie_docs = [d for d in value if (d["title"], d["text"]) in wanted]
    if len(openie_docs) != len(paragraphs):
        raise SystemExit(f"OpenIE covers {len(openie_docs)} of {len(paragraphs)} MuSiQue paragraphs")
    entities = [e for d in openie_docs for e in d["extracted_entities"]]
    out["musique_questions.json"] = json_list(mq)
    out["musique_corpus.json"] = json_list([{"title": t, "text": x} for t, x in paragraphs])
    stats = {
        "ents_by_doc": [],
        "avg_ent_chars": round(sum(map(len, entities)) / len(entities), 4),
        "avg_ent_words": round(sum(len(e.split()) for e in entities) / len(entities), 4),
        "current_cost": 0.0,
        "approx_total_cost": 0.0,
    }
    docs_lines = ",\n".join(json.dumps(d, ensure_ascii=False) for d in openie_docs)
    tail = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in stats.items())
    out["openie_musique.json"] = f'{{"docs": [\n{docs_lines}\n], {tail}}}\n'
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=bundled_data_dir() / "demo", help="output folder")
    parser.add_argument("--data", type=Path, default=None, help="shared benchmark folder (default: data_root())")
    parser.add_argument("--check", action="store_true", help="compare with the files in --out instead of writing")
    args = parser.parse_args(argv)
    files = build(args.data or data_root())
    if args.check:
        stale = [name for name, text in files.items() if not (args.out / name).is_file() or (args.out / name).read_text(encoding="utf-8") != text]
        for name in stale:
            print(f"{args.out / name}: differs from a fresh build", file=sys.stderr)
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (args.out / name).write_text(text, encoding="utf-8")
        print(f"{args.out / name}: {len(text.encode('utf-8')):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
