"""Golden trajectories for supervised cold starts, and the train/eval overlap check.

Sources, each rendered in the RouteRAG protocol (``<think>``, ``<search> [mode] q </search>``,
``<information>…</information>``, ``<answer>``) as typed :class:`~routerag.trace.Segment`s, so
that SFT masks prompt and observation tokens exactly as GRPO does:

* MuSiQue gold decompositions: one search per hop (``#k`` replaced by the k-th hop's answer), the
  hop's supporting paragraph as the evidence, the hop's answer in the next ``<think>``;
* HotpotQA supporting facts: one search per supporting title (the question first, then the
  bridge title), that title's passage as the evidence;
* R1-Router's released step-wise trajectories: each sub-question a search (text retriever ->
  ``[passage]``, table retriever -> ``[table]``…), its evidence lines as the observation;
* rejection sampling of policy rollouts that reach the gold answer (:func:`rejection_sample`).

:func:`r1_router_step_rows` turns the R1-Router trajectories into per-step prompts with their
gold for Step-GRPO. :func:`check_overlap` keeps training questions out of evaluation sets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from routerag.corpus.schema import Document, Question
from routerag.episode.segments import SegmentLog
from routerag.eval.metrics import METRICS
from routerag.eval.normalize import normalize_answer
from routerag.protocol.routerag_tags import information_block, render_answer, render_search, render_think
from routerag.sources.base import Hit
from routerag.strategies.prompts import routerag_prompt
from routerag.trace import Segment

ModePolicy = Literal["passage", "bridge-graph"]


class GoldenTrajectory(BaseModel):
    qid: str
    dataset: str
    question: str
    answers: list[str]
    source: str  # musique | hotpotqa | r1router | rejection
    segments: list[Segment]

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.segments)

    @property
    def completion(self) -> str:
        return "".join(s.text for s in self.segments if s.kind != "prompt")


class GoldenHop(BaseModel):
    think: str
    mode: str
    query: str
    evidence: list[Hit] = Field(default_factory=list)


def _hit(doc: Document | tuple[str, str], rank: int = 1, source: str = "passage") -> Hit:
    title, text = (doc.title, doc.text) if isinstance(doc, Document) else doc
    doc_id = doc.doc_id if isinstance(doc, Document) else f"gold-{rank}"
    return Hit(doc_id=doc_id, title=title, text=text, score=1.0, source=source, mode=source, rank=rank)


# ---------------------------------------------------------------- real retrieval as observations


class GroundingStats(BaseModel):
    """How the hops of golden trajectories were grounded in real retrieval."""

    hops: int = 0
    retrieved: dict[str, int] = Field(default_factory=dict)  # mode -> hops whose gold came back in top k
    switched: int = 0  # hops whose planned mode missed the gold but another mode found it
    injected: int = 0  # hops where no mode found the gold: the gold replaced one of the planned mode's hits

    @property
    def retrieved_total(self) -> int:
        return sum(self.retrieved.values())


def _same_doc(a: Hit, b: Hit) -> bool:
    return a.doc_id == b.doc_id or (a.title == b.title and a.text.strip()[:200] == b.text.strip()[:200])


class Grounder:
    """Replaces each hop's gold-only evidence by the top-``k`` hits that real retrieval returns
    for the hop's query, so that SFT observations look like inference observations.

    The query is cleaned exactly as RouteRAG's :class:`~routerag.strategies.routerag.ModeRouter`
    cleans it. The hop's planned mode is searched first; when its top ``k`` misses the gold
    paragraph the other modes are tried (the hop's mode tag follows the mode that found it);
    when none finds it, the gold paragraph replaces one of the planned mode's hits (at a position
    fixed by the question, not always first), so the trajectory stays answerable."""

    def __init__(self, sources: Any, *, k: int = 3, mode_sources: dict[str, str] | None = None,
                 modes: Sequence[str] = ("passage", "graph", "hybrid"), max_query_chars: int = 300) -> None:
        self.sources = sources
        self.k = k
        self.mode_sources = mode_sources or {m: m for m in modes}
        mounted = set(sources.names())
        self.modes = [m for m in modes if self.mode_sources.get(m) in mounted]
        if not self.modes:
            raise ValueError(f"none of the modes {list(modes)} is mounted; mounted: {sorted(mounted)}")
        self.max_query_chars = max_query_chars
        self.stats = GroundingStats()
        self._cache: dict[tuple[str, str], list[Hit]] = {}  # (mode, cleaned query) -> hits, from prefetch

    def _search(self, query: str, mode: str) -> list[Hit]:
        cached = self._cache.get((mode, query))
        if cached is not None:
            return list(cached)
        return list(self.sources.search_one(query, self.k, self.mode_sources[mode]).hits)

    def _planned(self, question: str, hop: GoldenHop) -> tuple[str, str]:
        """The hop's cleaned query and the mode searched first."""
        from routerag.strategies.parsing import clean_query

        query, _ = clean_query(hop.query, question, self.max_query_chars)
        return query, hop.mode if hop.mode in self.modes else self.modes[0]

    def prefetch(self, episodes: Iterable[tuple[str, Sequence[GoldenHop]]], *, batch_size: int = 64) -> int:
        """Search every hop's cleaned query in its planned mode in batches (one batched search
        per mode and ``batch_size`` queries: the embedder and the index see many queries at once)
        and keep the hits for :meth:`__call__`; the fallback modes of a hop whose planned mode
        misses the gold are still searched one by one. Returns the number of queries searched."""
        wanted: dict[str, dict[str, None]] = {}  # mode -> queries, ordered and unique
        for question, hops in episodes:
            for hop in hops:
                query, mode = self._planned(question, hop)
                if (mode, query) not in self._cache:
                    wanted.setdefault(mode, {})[query] = None
        searched = 0
        for mode, unique in wanted.items():
            queries, source = list(unique), self.mode_sources[mode]
            for start in range(0, len(queries), batch_size):
                chunk = queries[start:start + batch_size]
                for query, result in zip(chunk, self.sources.search(chunk, self.k, [source]).results[source]):
                    self._cache[(mode, query)] = list(result.hits)
                searched += len(chunk)
        return searched

    def __call__(self, question: str, hops: Sequence[GoldenHop]) -> list[GoldenHop]:
        out: list[GoldenHop] = []
        for n, hop in enumerate(hops):
            self.stats.hops += 1
            gold = hop.evidence[0] if hop.evidence else None
            query, planned = self._planned(question, hop)
            order = [planned, *(m for m in self.modes if m != planned)]
            first_hits: list[Hit] | None = None
            chosen: tuple[str, list[Hit]] | None = None
            for mode in order:
                hits = self._search(query, mode)
                first_hits = hits if first_hits is None else first_hits
                if gold is None or any(_same_doc(h, gold) for h in hits):
                    chosen = (mode, hits)
                    break
            if chosen is not None:
                mode, hits = chosen
                self.stats.retrieved[mode] = self.stats.retrieved.get(mode, 0) + 1
                self.stats.switched += mode != planned
            else:
                mode, hits = planned, list(first_hits or [])
                at = (len(question) + n) % self.k
                hits = [h for h in hits if not _same_doc(h, gold)][: self.k - 1]  # type: ignore[arg-type]
                hits.insert(min(at, len(hits)), gold)  # type: ignore[arg-type]
                self.stats.injected += 1
            out.append(hop.model_copy(update={"mode": mode, "query": query, "evidence": hits}))
        return out


def render_routerag(question: str, hops: Sequence[GoldenHop], answer: str, *, final_think: str = "",
                    prompt_template: str | None = None, few_shot: bool = False) -> list[Segment]:
    """Segments of one RouteRAG episode (the prompt is the user text, not chat-rendered)."""
    prompt = prompt_template.format(question=question) if prompt_template else routerag_prompt(question, few_shot=few_shot)
    log = SegmentLog(prompt)
    for hop in hops:
        log.add("model", render_think(hop.think) + "\n" + render_search([hop.mode], hop.query))
        log.add("observation", information_block(hop.evidence))
    log.add("model", render_think(final_think or "I have the answer.") + "\n" + render_answer(answer))
    return log.segments


_REF = re.compile(r"#(\d+)")


def musique_hops(q: Question, docs: dict[str, Document], mode_policy: ModePolicy = "bridge-graph") -> tuple[list[GoldenHop], str] | None:
    """A MuSiQue question's gold decomposition as hops (``#k`` bound to the k-th hop's answer)
    and the final thought; None when a hop lacks its supporting paragraph."""
    if not q.decomposition:
        return None
    answers: list[str] = []
    hops: list[GoldenHop] = []
    for i, sub in enumerate(q.decomposition):
        if not sub.supporting_doc_ids or sub.supporting_doc_ids[0] not in docs:
            return None
        bridge = bool(_REF.search(sub.question))
        query = _REF.sub(lambda m: answers[int(m.group(1)) - 1] if int(m.group(1)) <= len(answers) else m.group(0), sub.question)
        think = f"I need to find out: {query}" if i == 0 else f"The answer so far is {answers[-1]}. Next: {query}"
        mode = "graph" if (mode_policy == "bridge-graph" and bridge) else "passage"
        hops.append(GoldenHop(think=think, mode=mode, query=query, evidence=[_hit(docs[sub.supporting_doc_ids[0]])]))
        answers.append(sub.answer)
    return hops, f"The answer is {answers[-1]}."


def hotpotqa_hops(q: Question, docs: dict[str, Document], mode_policy: ModePolicy = "bridge-graph") -> tuple[list[GoldenHop], str] | None:
    """A HotpotQA question's supporting facts as hops: the question, then each further
    supporting title, is searched; that title's passage is the evidence."""
    titles = q.metadata.get("supporting_titles") or []
    by_title = {d.title: d for d in (docs[i] for i in q.supporting_doc_ids if i in docs)}
    if not titles or any(t not in by_title for t in titles):
        return None
    hops = []
    for i, title in enumerate(titles):
        query = q.question if i == 0 else title
        mode = "graph" if (mode_policy == "bridge-graph" and i > 0) else "passage"
        think = "I need evidence for the question." if i == 0 else f"The evidence points to {title}; I should look it up."
        hops.append(GoldenHop(think=think, mode=mode, query=query, evidence=[_hit(by_title[title])]))
    return hops, ""


def from_hops(q: Question, planned: tuple[list[GoldenHop], str] | None, source: str, *, ground: Grounder | None = None,
              **render: Any) -> GoldenTrajectory | None:
    """A trajectory from planned hops (grounded in real retrieval when ``ground``)."""
    if planned is None:
        return None
    hops, final_think = planned
    if ground is not None:
        hops = ground(q.question, hops)
    segments = render_routerag(q.question, hops, q.answer, final_think=final_think, **render)
    return GoldenTrajectory(qid=q.qid, dataset=q.dataset, question=q.question, answers=q.answers, source=source, segments=segments)


def from_musique(q: Question, docs: dict[str, Document], *, mode_policy: ModePolicy = "bridge-graph",
                 ground: Grounder | None = None, **render: Any) -> GoldenTrajectory | None:
    """A trajectory from a MuSiQue question's gold decomposition (None when a hop lacks support)."""
    return from_hops(q, musique_hops(q, docs, mode_policy), "musique", ground=ground, **render)


def from_hotpotqa(q: Question, docs: dict[str, Document], *, mode_policy: ModePolicy = "bridge-graph",
                  ground: Grounder | None = None, **render: Any) -> GoldenTrajectory | None:
    """A trajectory from a HotpotQA question's supporting facts (see :func:`hotpotqa_hops`)."""
    return from_hops(q, hotpotqa_hops(q, docs, mode_policy), "hotpotqa", ground=ground, **render)


GOLDEN_HOPS: dict[str, Callable[..., tuple[list[GoldenHop], str] | None]] = {
    "musique": musique_hops,
    "hotpotqa": hotpotqa_hops,
    # the 600 train + dev questions of HotpotQA distractor over their pooled training corpus
    "hotpotqa-distractor-train": hotpotqa_hops,
}
GOLDEN_SOURCES = (*GOLDEN_HOPS, "r1router")


# ---------------------------------------------------------------- R1-Router

R1_ROUTER_MODES = {"text retriever": "passage", "table retriever": "table", "text image retriever": "image"}
_EVIDENCE = re.compile(r"^(ter|tar|tir)-(\d+):\s?(.*)$")


def r1_router_path() -> Path:
    from routerag.corpus.datasets import r1_router_trajectories_path

    return r1_router_trajectories_path()


def read_r1_router(path: str | Path | None = None) -> list[dict[str, Any]]:
    with Path(path or r1_router_path()).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _evidence_lines(problem: str) -> list[tuple[str, str]]:
    body = problem.split("\n\n\n Give me the answer")[0]
    head, _, rest = body.partition("table retriever:")
    lines = (rest or head).split("\n")
    out = []
    for line in lines:
        m = _EVIDENCE.match(line.strip())
        if m:
            out.append(("", m.group(3)))
    return out


def _origin_question(problem: str) -> str:
    m = re.search(r"Origin question:\s*(.*)", problem)
    return m.group(1).strip() if m else problem.strip()


def from_r1_router(record: dict[str, Any], index: int, **render: Any) -> GoldenTrajectory | None:
    """A released R1-Router trajectory rendered in the RouteRAG protocol (text -> [passage],
    table -> [table], text-image -> [image])."""
    steps = record.get("steps") or []
    if not steps or steps[0].get("step_type") != "ret":
        return None
    question = _origin_question(steps[0]["problem"])
    hops: list[GoldenHop] = []
    pending: GoldenHop | None = None
    final: list[str] = []
    for st in steps:
        if st["step_type"] == "ret":
            ans = st["answer"]
            query = str(ans.get("query", "")).strip()
            retriever = (ans.get("retriever") or ["none"])[0].lower()
            if query.lower() in {"none", ""} or retriever == "none":
                pending = None
                continue
            think = "I need to find out: " + query if not hops else f"{hops[-1].think.split(': ', 1)[-1]} is settled. Next: {query}"
            pending = GoldenHop(think=think, mode=R1_ROUTER_MODES.get(retriever, "passage"), query=query)
        elif pending is not None:
            pending.evidence = [_hit(line, i + 1) for i, line in enumerate(_evidence_lines(st["problem"]))]
            hops.append(pending)
            pending = None
        else:
            final = [str(a) for a in st["answer"]] if isinstance(st["answer"], list) else [str(st["answer"])]
    if not final or not hops:
        return None
    segments = render_routerag(question, hops, final[0], **render)
    return GoldenTrajectory(qid=f"r1router-{index}", dataset="r1router", question=question, answers=final,
                            source="r1router", segments=segments)


def r1_router_step_rows(path: str | Path | None = None, *, limit: int | None = None) -> list[dict[str, Any]]:
    """Per-step Step-GRPO prompts of the R1-Router trajectories: ``prompt`` (system + user chat
    messages), ``answers`` (the step's gold answers) and ``step`` (JSON: step type and gold)."""
    rows: list[dict[str, Any]] = []
    for record in read_r1_router(path):
        steps = record.get("steps") or []
        last_ans = max((i for i, s in enumerate(steps) if s["step_type"] == "ans"), default=-1)
        for i, st in enumerate(steps):
            prompt = [{"role": "system", "content": st["system"]}, {"role": "user", "content": st["problem"]}]
            if st["step_type"] == "ret":
                ans = st["answer"]
                extra = {"step_type": "ret", "gold_query": str(ans.get("query", "")).strip(),
                         "gold_retriever": (ans.get("retriever") or ["none"])[0]}
                golds: list[str] = [extra["gold_query"]]
            else:
                answer = st["answer"]
                golds = [str(a) for a in answer] if isinstance(answer, list) else [str(answer).strip()]
                extra = {"step_type": "final" if i == last_ans else "ans", "gold_answer": golds[0]}
            rows.append({"prompt": prompt, "answers": golds, "step": json.dumps(extra)})
        if limit is not None and len(rows) >= limit:
            break
    return rows[:limit] if limit is not None else rows


# ---------------------------------------------------------------- collections


def golden_trajectories(sources: Iterable[str], *, exclude_eval: Sequence[str] = ("2wiki",),
                        mode_policy: ModePolicy = "bridge-graph", ground: Callable[[str], Grounder] | None = None,
                        **render: Any) -> list[GoldenTrajectory]:
    """Golden trajectories from the named sources, minus those overlapping ``exclude_eval``
    (dataset names, or ``name:N`` for the N evenly spaced questions ``routerag eval --limit N``
    evaluates). ``ground(dataset_name)`` gives a :class:`Grounder` whose real retrieval replaces
    the gold-only evidence of MuSiQue / HotpotQA hops (questions are filtered before retrieval)."""
    from routerag.corpus.datasets import load_dataset

    eval_questions = eval_set_questions(exclude_eval) if exclude_eval else []
    out: list[GoldenTrajectory] = []
    for name in sources:
        if name in GOLDEN_HOPS:
            data = load_dataset(name)
            docs = {d.doc_id: d for d in data.documents()}
            questions = data.questions
            if eval_questions:
                bad = set(check_overlap(questions, eval_questions).overlapping)
                questions = [q for q in questions if q.qid not in bad]
            planned = [(q, GOLDEN_HOPS[name](q, docs, mode_policy)) for q in questions]
            grounder = ground(name) if ground is not None else None
            if grounder is not None:  # one batched search per mode instead of one search per hop
                grounder.prefetch((q.question, p[0]) for q, p in planned if p is not None)
            out += [t for q, p in planned if (t := from_hops(q, p, name, ground=grounder, **render)) is not None]
        elif name == "r1router":
            out += [t for i, r in enumerate(read_r1_router()) if (t := from_r1_router(r, i, **render)) is not None]
        else:
            raise ValueError(f"unknown golden source {name!r}; valid: {', '.join(GOLDEN_SOURCES)}")
    if eval_questions:
        as_questions = [Question(qid=t.qid, question=t.question, answers=t.answers, dataset=t.dataset) for t in out]
        bad = set(check_overlap(as_questions, eval_questions).overlapping)
        out = [t for t in out if t.qid not in bad]
    return out


def rejection_sample(env: Any, questions: Sequence[Question], generate: Callable, *, samples: int = 4,
                     metric: str = "em", threshold: float = 1.0) -> list[GoldenTrajectory]:
    """Roll each question out ``samples`` times; keep the first episode whose answer reaches the
    gold (``metric >= threshold``) and that followed the protocol."""
    from routerag.train.rewards import followed_protocol

    scorer = METRICS.get(metric)
    kept = []
    for q in questions:
        for _ in range(samples):
            r = env.rollout(q, generate)
            if r.trace.answer and followed_protocol(r.trace) and scorer(r.trace.answer, q.answers) >= threshold:
                prompt_user = env.config.prompt_template.format(question=q.question) if env.config.prompt_template \
                    else routerag_prompt(q.question, few_shot=env.config.few_shot)
                segments = [Segment(kind="prompt", text=prompt_user + env.config.assistant_prefix), *r.trace.segments[1:]]
                kept.append(GoldenTrajectory(qid=q.qid, dataset=q.dataset, question=q.question, answers=q.answers,
                                             source="rejection", segments=segments))
                break
    return kept


# ---------------------------------------------------------------- overlap with evaluation sets


def question_key(question: str, answer: str) -> str:
    """Normalised question text + normalised answer."""
    return f"{normalize_answer(question)}||{normalize_answer(answer)}"


class OverlapReport(BaseModel):
    n_train: int
    n_eval: int
    overlapping: list[str]  # training qids that occur in an evaluation set
    reasons: dict[str, str] = Field(default_factory=dict)  # qid -> "question+answer" | "id" | "hop"

    @property
    def clean(self) -> bool:
        return not self.overlapping


def eval_set_questions(eval_sets: Sequence[str] | Sequence[Question]) -> list[Question]:
    """Questions of evaluation sets given as dataset names (all questions), ``name:N`` (the N
    evenly spaced questions that ``routerag eval --dataset name --limit N`` evaluates, i.e.
    ``load_dataset(name).sample(N)``) or :class:`Question` objects."""
    from routerag.corpus.datasets import load_dataset

    out: list[Question] = []
    for item in eval_sets:
        if isinstance(item, Question):
            out.append(item)
            continue
        name, _, n = str(item).partition(":")
        if n and not n.isdigit():
            raise ValueError(f"evaluation set {item!r}: expected NAME or NAME:N with N a number of questions")
        data = load_dataset(name)
        out += (data.sample(int(n)) if n else data).questions
    return out


def _hop_keys(q: Question) -> set[str]:
    return {question_key(h.question, h.answer) for h in q.decomposition or [] if h.question and h.answer}


def check_overlap(train: Sequence[Question], eval_sets: Sequence[str] | Sequence[Question]) -> OverlapReport:
    """Training questions that also occur in the evaluation sets: same normalised question and
    answer (any alias pair), the same question id (MuSiQue ids), or, for decomposed questions,
    a shared hop (same normalised sub-question and sub-answer: MuSiQue composes its questions
    from shared single-hop questions). ``eval_sets`` are dataset names, ``name:N`` samples (see
    :func:`eval_set_questions`) or questions."""
    eval_questions = eval_set_questions(eval_sets)
    keys = {question_key(q.question, a) for q in eval_questions for a in (q.answers or [""])}
    ids = {q.qid for q in eval_questions}
    hops = set().union(*(_hop_keys(q) for q in eval_questions)) if eval_questions else set()
    overlapping: list[str] = []
    reasons: dict[str, str] = {}
    for q in train:
        if any(question_key(q.question, a) in keys for a in (q.answers or [""])):
            overlapping.append(q.qid)
            reasons[q.qid] = "question+answer"
        elif q.qid in ids:
            overlapping.append(q.qid)
            reasons[q.qid] = "id"
        elif _hop_keys(q) & hops:
            overlapping.append(q.qid)
            reasons[q.qid] = "hop"
    return OverlapReport(n_train=len(train), n_eval=len(eval_questions), overlapping=overlapping, reasons=reasons)


def assert_disjoint(train: Sequence[Question], eval_sets: Sequence[str] | Sequence[Question]) -> None:
    report = check_overlap(train, eval_sets)
    if report.overlapping:
        raise ValueError(f"{len(report.overlapping)} training questions overlap evaluation data: {report.overlapping[:5]}")
