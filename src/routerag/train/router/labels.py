"""Routing labels from retrieval outcomes, on training questions only.

* **Mode labels** (:func:`mode_labels`): for every hop of the golden trajectories of a training set
  (MuSiQue gold decompositions, HotpotQA supporting facts; :data:`routerag.train.golden.GOLDEN_HOPS`),
  the hop's query (cleaned as RouteRAG cleans a search) is searched in every mode; a mode is a
  success when its top ``k`` holds the hop's gold paragraph. Each mode's measured wall time per
  query (batched search) and the per-mode cost the rewards use are recorded beside it.
* **Strategy labels** (:mod:`routerag.train.router.strategy_labels`): which strategies answered a
  training question correctly, and their tokens, from ``routerag eval`` runs.
* **Source labels**: a multi-source set's gold source where the data names one (law-med,
  :func:`gold_source_labels`); else the sources whose top ``k`` holds a gold answer string
  (2Wiki local/global, :func:`answer_source_labels`).

Questions of the evaluation sets are removed first (:func:`routerag.corpus.contamination.check_overlap`:
same question+answer, id, or a shared MuSiQue hop). A label file is gzip JSONL: its first line is
the :class:`LabelProvenance` (which index, which ``k``, which commit), then one row per hop or
question. ``routerag router labels`` rebuilds them all.
"""

from __future__ import annotations

import gzip
import json
import subprocess
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from routerag.routing.base import RoutingError
from routerag.trace import Hit

MODES: tuple[str, ...] = ("passage", "bm25", "graph", "hybrid")
# the evaluation samples whose questions never enter labels: the 2Wiki-100 and MuSiQue-50 runs, law-med-50
# and the whole held-out HotpotQA distractor test split
DEFAULT_EVAL_SETS: tuple[str, ...] = ("2wiki:100", "musique:50", "law-med:50", "hotpotqa-distractor")
LabelKind = Literal["mode", "source", "strategy"]


class LabelProvenance(BaseModel):
    kind: LabelKind
    dataset: str
    k: int
    choices: list[str]  # the modes or sources labelled
    label_rule: str
    index: dict[str, object] = Field(default_factory=dict)  # index directory name, corpus hash, components, embedder
    mode_cost: dict[str, float] = Field(default_factory=dict)  # the rewards' per-mode prices
    excluded_eval_sets: list[str] = Field(default_factory=list)
    excluded_questions: int = 0
    questions: int = 0
    rows: int = 0
    git_commit: str = ""
    created: str = ""


class RouteLabel(BaseModel):
    """One routed query and which choices succeeded for it."""

    qid: str  # the question: cross-validation groups by it
    dataset: str
    hop: int = 0
    query: str
    question: str = ""  # the question the hop belongs to; empty when the query is the question
    success: dict[str, bool]  # choice -> found the gold in the top k
    rank: dict[str, int | None] = Field(default_factory=dict)  # choice -> 1-based rank of the gold, None: not in top k
    wall_ms: dict[str, float] = Field(default_factory=dict)  # choice -> measured retrieval wall time per query
    mode_cost: dict[str, float] = Field(default_factory=dict)  # choice -> the rewards' price
    tokens: dict[str, int] = Field(default_factory=dict)  # choice -> model tokens spent (strategy labels)

    @property
    def label(self) -> list[str]:
        return [c for c, ok in self.success.items() if ok]


# ---------------------------------------------------------------- files


def git_commit() -> str:
    """The commit of the checkout this module runs from (``+dirty`` when it has changes), or ''."""
    root = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""
    return head + ("+dirty" if dirty else "")


def write_labels(path: str | Path, provenance: LabelProvenance, rows: Sequence[RouteLabel]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    provenance = provenance.model_copy(update={"rows": len(rows)})
    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as handle:  # mtime in the header: rebuilt files differ
        handle.write(json.dumps({"provenance": provenance.model_dump(mode="json")}) + "\n")
        for row in rows:
            handle.write(row.model_dump_json() + "\n")
    tmp.replace(path)
    return path


def read_labels(path: str | Path) -> tuple[LabelProvenance, list[RouteLabel]]:
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            lines = [line for line in handle if line.strip()]
    except OSError as exc:
        raise RoutingError(f"{path}: cannot read the label file ({exc})") from None
    if not lines:
        raise RoutingError(f"{path}: empty label file")
    try:
        head = json.loads(lines[0])
        provenance = LabelProvenance.model_validate(head["provenance"])
    except (ValueError, KeyError, TypeError) as exc:
        raise RoutingError(f"{path}: the first line is not a label provenance record ({exc})") from None
    rows = []
    for n, line in enumerate(lines[1:], start=2):
        try:
            rows.append(RouteLabel.model_validate_json(line))
        except ValueError as exc:
            raise RoutingError(f"{path}:{n}: not a routing label ({str(exc).splitlines()[0]})") from None
    return provenance, rows


# ---------------------------------------------------------------- building


def _index_identity(manifest_paths: Sequence[Path]) -> dict[str, object]:
    out: dict[str, object] = {}
    for path in manifest_paths:
        try:
            manifest = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        key = Path(path).parent.name
        out[key] = {name: manifest.get(name) for name in ("corpus_hash", "n_docs", "components", "embedder")}
    return out


def training_questions(dataset: str, eval_sets: Sequence[str]):
    """The dataset's questions minus those overlapping the evaluation sets; (dataset, kept, excluded)."""
    from routerag.corpus.contamination import check_overlap
    from routerag.corpus.datasets import load_dataset

    data = load_dataset(dataset)
    questions = data.questions
    excluded = 0
    if eval_sets:
        bad = set(check_overlap(questions, list(eval_sets)).overlapping)
        excluded = len(bad)
        questions = [q for q in questions if q.qid not in bad]
    return data, questions, excluded


def search_batched(sources, queries: list[str], k: int, source: str, batch: int, *, warm_up: bool = True):
    """Every query's result from ``source`` (batched; each result carries its per-query latency).
    With ``warm_up``, one search first, so that loading the embedder or the graph is not timed."""
    if warm_up and queries:
        sources.search(queries[:1], k, [source])
    out = []
    for start in range(0, len(queries), batch):
        out += sources.search(queries[start:start + batch], k, [source]).results[source]
    return out


def answer_rank(hits: Sequence[Hit], answers: Sequence[str]) -> int | None:
    """The 1-based rank of the first hit whose title and text hold a gold answer string
    (both normalised, matched as whole words), else None: what decides an answer-outcome label
    (:func:`answer_source_labels`) and ``routerag routing-report``'s recall@k."""
    from routerag.corpus.normalize import normalize_answer

    golds = [g for g in (normalize_answer(a) for a in answers) if g]
    for rank, hit in enumerate(hits, start=1):
        text = f" {normalize_answer(f'{hit.title} {hit.text}')} "
        if any(f" {g} " in text for g in golds):
            return rank
    return None


def mode_labels(dataset: str, *, k: int = 5, modes: Sequence[str] = MODES, eval_sets: Sequence[str] = DEFAULT_EVAL_SETS,
                batch: int = 32, max_query_chars: int = 300) -> tuple[LabelProvenance, list[RouteLabel]]:
    """Mode labels for every golden-trajectory hop of ``dataset``'s training questions, over the
    index ``routerag eval --dataset DATASET --set components=[dense,bm25,graph]`` searches."""
    from routerag.run.assemble import build_sources
    from routerag.run.config import RunConfig
    from routerag.runtime.parsing import clean_query
    from routerag.train.golden import GOLDEN_HOPS, same_doc
    from routerag.train.rewards import DEFAULT_MODE_COST

    if dataset not in GOLDEN_HOPS:
        raise RoutingError(f"no golden hops for {dataset!r}; valid: {', '.join(GOLDEN_HOPS)}")
    data, questions, excluded = training_questions(dataset, eval_sets)
    docs = {d.doc_id: d for d in data.documents()}
    sources, manifests = build_sources(data, RunConfig(dataset=dataset, components=["dense", "bm25", "graph"]))
    missing = [m for m in modes if m not in sources.names()]
    if missing:
        raise RoutingError(f"{dataset}: modes {missing} are not mounted; mounted: {sources.names()}")
    hops = []  # (question, hop number, cleaned query, gold hit)
    for q in questions:
        planned = GOLDEN_HOPS[dataset](q, docs, "passage")
        if planned is None:
            continue
        for n, hop in enumerate(planned[0]):
            query, _ = clean_query(hop.query, q.question, max_query_chars)
            hops.append((q, n, query, hop.evidence[0]))
    queries = [h[2] for h in hops]
    results = {mode: search_batched(sources, queries, k, mode, batch) for mode in modes}
    prices = {m: float(DEFAULT_MODE_COST.get(m, 1.0)) for m in modes}
    rows = []
    for i, (q, n, query, gold) in enumerate(hops):
        rank: dict[str, int | None] = {}
        for mode in modes:
            found = next((j + 1 for j, h in enumerate(results[mode][i].hits[:k]) if same_doc(h, gold)), None)
            rank[mode] = found
        rows.append(RouteLabel(
            qid=q.qid, dataset=dataset, hop=n, query=query, question="" if query == q.question else q.question,
            success={m: rank[m] is not None for m in modes}, rank=rank,
            wall_ms={m: round(results[m][i].latency_ms, 3) for m in modes}, mode_cost=prices,
        ))
    provenance = LabelProvenance(
        kind="mode", dataset=dataset, k=k, choices=list(modes),
        label_rule=f"a mode succeeds when its top {k} for the hop's query holds the hop's gold paragraph",
        index=_index_identity(manifests), mode_cost=prices, excluded_eval_sets=list(eval_sets),
        excluded_questions=excluded, questions=len({r.qid for r in rows}), git_commit=git_commit(),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    return provenance, rows


def gold_source_labels(dataset: str, *, eval_sets: Sequence[str] = DEFAULT_EVAL_SETS) -> tuple[LabelProvenance, list[RouteLabel]]:
    """Source labels of a multi-source set whose questions name their gold source (law-med)."""
    data, questions, excluded = training_questions(dataset, eval_sets)
    names = list(data.sources)
    if not names:
        raise RoutingError(f"{dataset}: not a multi-source dataset")
    rows = [RouteLabel(qid=q.qid, dataset=dataset, query=q.question,
                       success={n: n == q.gold_source for n in names})
            for q in questions if q.gold_source in names]
    if not rows:
        raise RoutingError(f"{dataset}: no question names its gold source; use answer_source_labels")
    provenance = LabelProvenance(
        kind="source", dataset=dataset, k=0, choices=names, label_rule="the question's gold source as released",
        excluded_eval_sets=list(eval_sets), excluded_questions=excluded, questions=len(rows),
        git_commit=git_commit(), created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    return provenance, rows


def answer_source_labels(dataset: str, *, k: int = 5, eval_sets: Sequence[str] = DEFAULT_EVAL_SETS,
                         batch: int = 32) -> tuple[LabelProvenance, list[RouteLabel]]:
    """Source labels from outcomes for a multi-source set without gold sources (2Wiki local/global):
    a source succeeds when its top ``k`` (dense passages, as ``routerag eval`` mounts the sources)
    holds a gold answer string (normalised, whole words)."""
    from routerag.run.assemble import build_sources
    from routerag.run.config import RunConfig

    data, questions, excluded = training_questions(dataset, eval_sets)
    sources, manifests = build_sources(data, RunConfig(dataset=dataset))
    names = list(data.sources)
    results = {n: search_batched(sources, [q.question for q in questions], k, n, batch) for n in names}
    rows = []
    for i, q in enumerate(questions):
        success = {n: answer_rank(results[n][i].hits[:k], q.answers) is not None for n in names}
        rows.append(RouteLabel(qid=q.qid, dataset=dataset, query=q.question, success=success,
                               wall_ms={n: round(results[n][i].latency_ms, 3) for n in names}))
    provenance = LabelProvenance(
        kind="source", dataset=dataset, k=k, choices=names,
        label_rule=f"a source succeeds when its top {k} dense passages hold a gold answer string",
        index=_index_identity(manifests), excluded_eval_sets=list(eval_sets), excluded_questions=excluded,
        questions=len(rows), git_commit=git_commit(), created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    return provenance, rows


LABEL_SETS: dict[str, tuple[LabelKind, str]] = {
    # file stem -> (kind, dataset)
    "mode-musique": ("mode", "musique"),
    "mode-hotpotqa": ("mode", "hotpotqa"),
    # the 600 HotpotQA distractor train + dev questions over their pooled contexts (the test split is held out)
    "mode-hotpotqa-distractor": ("mode", "hotpotqa-distractor-train"),
    "source-law-med": ("source", "law-med"),
    "source-2wiki-multisource": ("source", "2wiki-multisource"),
}


def build_label_set(stem: str, out_dir: str | Path, *, k: int = 5, eval_sets: Sequence[str] = DEFAULT_EVAL_SETS) -> Path:
    """Build one named label file (:data:`LABEL_SETS`) into ``out_dir``."""
    if stem not in LABEL_SETS:
        raise RoutingError(f"unknown label set {stem!r}; valid: {', '.join(LABEL_SETS)}")
    kind, dataset = LABEL_SETS[stem]
    if kind == "mode":
        provenance, rows = mode_labels(dataset, k=k, eval_sets=eval_sets)
    elif dataset == "law-med":
        provenance, rows = gold_source_labels(dataset, eval_sets=eval_sets)
    else:
        provenance, rows = answer_source_labels(dataset, k=k, eval_sets=eval_sets)
    return write_labels(Path(out_dir) / f"{stem}.jsonl.gz", provenance, rows)
