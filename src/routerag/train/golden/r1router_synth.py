"""Grounded step-wise R1-Router trajectories synthesised from gold data (``routerag golden-steps``).

Each trajectory is a record in the released trajectories' format (:mod:`.r1router`: ``{"images",
"steps": [{step_type, system, problem, answer}]}``) whose prompts are the ones the ``r1-router``
strategy writes (:mod:`routerag.strategies.prompts`), so :func:`~.r1router.record_step_rows` turns
it into the step rows ``r1-router-step`` and ``r1-router-sft`` train on. Per retrieval hop: a
``ret`` step (the history so far -> the hop's sub-question and knowledge base) and an ``ans`` step
(the hop's top-``k`` evidence -> the hop's gold answer); then the stop step (sub-question and
retriever ``none``, as released) and the final answer (the gold answer).

A hop is kept only when routerag's own retrieval, searched with the hop's sub-question (cleaned as
the strategy cleans it), returns the evidence the hop's answer needs: the trajectory is grounded.
A trajectory with one ungrounded hop is dropped, and why is counted (:class:`Synthesised`).

=============  ==============================================================================
``wtq-train``  WikiTableQuestions training questions: one Table Retriever hop, the question
               itself, kept when BM25 over every table (the table corpus of ``wtq-train``'s
               cached index) returns a part of the question's own table in its top ``k``
``musique``    MuSiQue questions with gold decompositions: one Text Retriever hop per
               decomposition step (``#k`` filled with the k-th hop's answer), kept when BM25
               over that question's own paragraphs returns the hop's supporting paragraph
=============  ==============================================================================

Sources are registered in :data:`STEP_SOURCES` (each loads its data only when used). 2WikiMultihopQA and
HotpotQA are not among them: their shared files hold no gold decompositions (2Wiki's questions
carry their answers only, HotpotQA's their supporting facts), so their sub-questions would have
to be written by a model.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, Field

from routerag.corpus.schema import Document, Question
from routerag.registry import Registry, classes_with
from routerag.trace import Hit

TEXT_RETRIEVER = "Text Retriever"
TABLE_RETRIEVER = "Table Retriever"
STOP_ANSWER = {"query": "none", "retriever": ["none"]}  # the released stop step's answer
MAX_QUERY_CHARS = 300  # the r1-router strategy's default max_query_chars

_REF = re.compile(r"#\d+")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([?.,!;:]|'s\b)")
_TRIPLE = re.compile(r"^\s*(.+?)\s*>>\s*(.+?)\s*\??\s*$")  # MuSiQue's Wikidata hops: "Peter Bonetti >> member of sports team"


class PlannedHop(BaseModel):
    """One hop before retrieval: the sub-question, its knowledge base, its gold answer and the
    documents any one of which grounds it."""

    query: str
    retriever: str
    answer: str
    gold_doc_ids: list[str]


class RoutedHop(BaseModel):
    """One grounded hop: the sub-question, its knowledge base, the top-``k`` evidence retrieval
    returned for it, and the hop's gold answer."""

    query: str
    retriever: str
    answer: str
    evidence: list[Hit] = Field(default_factory=list)


class Synthesised(BaseModel):
    """One question's outcome: its trajectory record, or why it was dropped."""

    qid: str
    record: dict[str, Any] | None = None
    dropped: str | None = None  # the reason: eval_overlap, table_not_retrieved, support_not_retrieved, ...
    failed_hop: int | None = None  # the 1-based hop whose evidence retrieval missed


Search = Callable[[Sequence[str]], list[list[Hit]]]
"""Queries -> the top-``k`` hits of each (one source, ``k`` fixed by whoever built it)."""


def abbreviations(retrievers: Sequence[str]) -> dict[str, str]:
    """Each knowledge base's evidence label prefix, as the ``r1-router`` strategy labels them (``ter``...)."""
    from routerag.strategies.r1_router import R1RouterParams

    params = R1RouterParams()
    return {name: params.abbreviation(name) for name in retrievers}


def shown_as_written(hop: RoutedHop) -> tuple[str, str]:
    """The hop's sub-question and answer as the ``r1-router`` strategy puts them into its later
    prompts (the intermediate-answer question, the history): verbatim between the tags of the
    output the policy is trained to write (:func:`~.r1router.r1_router_gold_completion`, which puts
    a tag's content on its own line), taken out as the strategy takes it."""
    from routerag.runtime.parsing import extract_tag
    from routerag.train.golden.r1router import r1_router_gold_completion

    route = r1_router_gold_completion({"step_type": "ret", "gold_query": hop.query, "gold_retriever": hop.retriever})
    answer = r1_router_gold_completion({"step_type": "ans", "gold_answer": hop.answer})
    return extract_tag(route, "<sub-question>", "</sub-question>") or hop.query, extract_tag(answer, "<answer>", "</answer>") or hop.answer


def trajectory_record(trajectory: str, source: str, question: Question, hops: Sequence[RoutedHop],
                      final_answers: Sequence[str], guidelines: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A trajectory in the released format: per hop a ``ret`` and an ``ans`` step, then the stop
    step and the final answer, each with the prompt the ``r1-router`` strategy writes at that
    point for a policy writing the gold outputs (the decomposition prompt offers ``guidelines``'
    knowledge bases, by default R1-Router's released three; the hop's top-``k`` evidence whole, as
    the strategy shows it; earlier sub-questions and answers as written, :func:`shown_as_written`).
    ``id``, ``source``, ``question`` and ``answers`` are kept beside ``steps``."""
    from routerag.strategies.prompts import (
        R1_ROUTER_FINAL_SYSTEM,
        R1_ROUTER_GUIDELINES,
        R1_ROUTER_STEP_ANSWER_SYSTEM,
        r1_router_evidence,
        r1_router_final,
        r1_router_history,
        r1_router_ret_system,
    )

    offered = dict(guidelines or R1_ROUTER_GUIDELINES)
    ret_system = r1_router_ret_system(offered)
    legend = abbreviations(list(offered))
    history: list[tuple[str, str]] = []
    steps: list[dict[str, Any]] = []
    for hop in hops:
        if hop.retriever not in offered:
            raise ValueError(f"hop retriever {hop.retriever!r} is not offered ({', '.join(offered)})")
        sub_question, answer = shown_as_written(hop)
        steps.append({"step_type": "ret", "system": ret_system, "problem": r1_router_history(question.question, history),
                      "answer": {"query": hop.query, "retriever": [hop.retriever.lower()]}})
        steps.append({"step_type": "ans", "system": R1_ROUTER_STEP_ANSWER_SYSTEM,
                      "problem": r1_router_evidence(sub_question, [(legend[hop.retriever], hop.evidence)], legend),
                      "answer": hop.answer})
        history.append((sub_question, answer))
    steps.append({"step_type": "ret", "system": ret_system, "problem": r1_router_history(question.question, history),
                  "answer": dict(STOP_ANSWER)})
    steps.append({"step_type": "ans", "system": R1_ROUTER_FINAL_SYSTEM, "problem": r1_router_final(question.question, history),
                  "answer": list(final_answers)})
    return {"id": trajectory, "source": source, "question": question.question, "answers": list(question.answers),
            "images": [], "steps": steps}


def clean_sub_question(query: str, question: str) -> str:
    """The sub-question as the strategy searches it (:func:`~routerag.runtime.parsing.clean_query`),
    without the spaces MuSiQue leaves before punctuation and ``'s`` (``"... of #1 ?"``), and a
    MuSiQue Wikidata hop ``"subject >> relation"`` written as a question (``"What is the relation
    of subject?"``)."""
    from routerag.runtime.parsing import clean_query

    triple = _TRIPLE.match(query)
    if triple is not None:
        query = f"What is the {triple.group(2)} of {triple.group(1)}?"
    cleaned, _ = clean_query(_SPACE_BEFORE_PUNCT.sub(r"\1", query), question, MAX_QUERY_CHARS)
    return cleaned


def ground(plan: Sequence[PlannedHop], hits_for: Callable[[str], list[Hit]]) -> tuple[list[RoutedHop] | None, int | None]:
    """The planned hops with their retrieved evidence, or ``(None, hop)`` for the first (1-based)
    hop whose top ``k`` holds none of its gold documents."""
    out: list[RoutedHop] = []
    for n, hop in enumerate(plan, start=1):
        hits = hits_for(hop.query)
        if not any(h.doc_id in hop.gold_doc_ids for h in hits):
            return None, n
        out.append(RoutedHop(query=hop.query, retriever=hop.retriever, answer=hop.answer, evidence=hits))
    return out, None


def _outcome(source: str, q: Question, plan: Sequence[PlannedHop], hits_for: Callable[[str], list[Hit]],
             miss: str, final_answers: Sequence[str]) -> Synthesised:
    hops, failed = ground(plan, hits_for)
    if hops is None:
        return Synthesised(qid=q.qid, dropped=miss, failed_hop=failed)
    return Synthesised(qid=q.qid, record=trajectory_record(f"{source}:{q.qid}", source, q, hops, final_answers))


# ------------------------------------------------------------------------------ WikiTableQuestions


def wtq_answer(q: Question) -> str:
    """A WikiTableQuestions answer list as one answer string (items joined by ``, ``, which the
    ``wtq`` answer scheme splits again)."""
    return ", ".join(a.strip() for a in q.answers if a.strip())


def wtq_plan(q: Question) -> list[PlannedHop] | str:
    """One Table Retriever hop, the question itself, grounded by any part of its own table; or
    the reason there is none (``no_answer``, ``no_table``)."""
    answer = wtq_answer(q)
    if not answer:
        return "no_answer"
    if not q.supporting_doc_ids:
        return "no_table"
    return [PlannedHop(query=clean_sub_question(q.question, q.question), retriever=TABLE_RETRIEVER, answer=answer,
                       gold_doc_ids=list(q.supporting_doc_ids))]


def wtq_trajectories(questions: Sequence[Question], search: Search, *, source: str = "wtq-train",
                     batch_size: int = 256) -> list[Synthesised]:
    """Table trajectories of WikiTableQuestions questions over one table source (``search``: its
    top ``k``, searched in batches of ``batch_size``)."""
    plans = [(q, wtq_plan(q)) for q in questions]
    queries = list(dict.fromkeys(h.query for _, p in plans if not isinstance(p, str) for h in p))
    found: dict[str, list[Hit]] = {}
    for start in range(0, len(queries), batch_size):
        chunk = queries[start:start + batch_size]
        found.update(zip(chunk, search(chunk)))
    out: list[Synthesised] = []
    for q, plan in plans:
        if isinstance(plan, str):
            out.append(Synthesised(qid=q.qid, dropped=plan))
        else:
            out.append(_outcome(source, q, plan, lambda query: found[query], "table_not_retrieved", [plan[-1].answer]))
    return out


# ------------------------------------------------------------------------------ MuSiQue


def musique_plan(q: Question, paragraphs: Sequence[Document]) -> list[PlannedHop] | str:
    """One Text Retriever hop per gold decomposition step (``#k`` filled with the k-th hop's
    answer), grounded by its supporting paragraph; or the reason there is none (``unanswerable``,
    ``no_decomposition``, ``missing_support``, ``unresolved_reference``)."""
    from routerag.train.golden.musique import musique_hops

    if q.metadata.get("answerable") is False:
        return "unanswerable"
    if not q.decomposition:
        return "no_decomposition"
    planned = musique_hops(q, {d.doc_id: d for d in paragraphs}, "passage")
    if planned is None:
        return "missing_support"
    hops, _ = planned
    if any(_REF.search(h.query) for h in hops) or any(not sub.answer.strip() for sub in q.decomposition):
        return "unresolved_reference"
    return [PlannedHop(query=clean_sub_question(h.query, q.question), retriever=TEXT_RETRIEVER, answer=sub.answer.strip(),
                       gold_doc_ids=list(sub.supporting_doc_ids))
            for h, sub in zip(hops, q.decomposition)]


def row_search(paragraphs: Sequence[Document], k: int, directory: str | Path) -> Callable[[str], list[Hit]]:
    """BM25 top ``k`` over one question's own paragraphs (its index built under ``directory``)."""
    from routerag.train.fixtures import bm25_sourceset

    sources = bm25_sourceset({"row": paragraphs}, directory)

    def hits_for(query: str) -> list[Hit]:
        return list(sources.search_one(query, k, "row").hits)

    return hits_for


def musique_trajectories(questions: Sequence[Question], paragraphs: Mapping[str, Sequence[Document]], *, k: int,
                         source: str = "musique") -> list[Synthesised]:
    """Text trajectories of MuSiQue questions, each hop searched by BM25 over the question's own
    paragraphs (``paragraphs[qid]``; a question without them is dropped as ``no_paragraphs``)."""
    out: list[Synthesised] = []
    with tempfile.TemporaryDirectory(prefix="routerag-steps-") as tmp:
        for i, q in enumerate(questions):
            own = paragraphs.get(q.qid)
            plan = musique_plan(q, own or [])
            if not own:
                out.append(Synthesised(qid=q.qid, dropped="no_paragraphs"))
            elif isinstance(plan, str):
                out.append(Synthesised(qid=q.qid, dropped=plan))
            else:
                hits_for = row_search(own, k, Path(tmp) / str(i))
                out.append(_outcome(source, q, plan, hits_for, "support_not_retrieved", list(q.answers)))
    return out


def musique_row_paragraphs(path: str | Path) -> dict[str, list[Document]]:
    """Each question's own paragraphs in a MuSiQue question file (``id`` -> documents, ids as the
    MuSiQue loader makes them, so that a hop's ``supporting_doc_ids`` point into them)."""
    import json

    records = json.loads(Path(path).read_text(encoding="utf-8"))
    out: dict[str, list[Document]] = {}
    for rec in records:
        docs = [Document.make(p.get("title", ""), p.get("paragraph_text", p.get("text", "")))
                for p in rec.get("paragraphs", []) if str(p.get("paragraph_text", p.get("text", ""))).strip()]
        out[str(rec["id"])] = docs
    return out


# ------------------------------------------------------------------------------ registered sources


class StepSource(Protocol):
    """A source of synthesised trajectories: its training questions, and their outcomes."""

    name: ClassVar[str]

    def questions(self) -> list[Question]: ...

    def synthesise(self, questions: Sequence[Question], k: int) -> list[Synthesised]: ...


STEP_SOURCES: Registry[type] = Registry("step source", classes_with("questions", "synthesise"))


class WTQTableSteps:
    """``wtq-train``: WikiTableQuestions training questions over the BM25 component of the
    dataset's cached index (every table; the index ``routerag eval --dataset wtq-train`` uses)."""

    name: ClassVar[str] = "wtq-train"

    def questions(self) -> list[Question]:
        from routerag.corpus.datasets import load_dataset

        return load_dataset(self.name).questions

    def synthesise(self, questions: Sequence[Question], k: int) -> list[Synthesised]:
        from routerag.train.data import grounding_sources

        sources = grounding_sources(self.name, ["bm25"])
        (table,) = sources.names()

        def search(queries: Sequence[str]) -> list[list[Hit]]:
            return [list(r.hits) for r in sources.search(queries, k, [table]).results[table]]

        return wtq_trajectories(questions, search, source=self.name)


class MuSiQueTextSteps:
    """``musique``: MuSiQue questions (``musique_train100``) with their gold decompositions, each
    hop searched over the question's own 20 paragraphs."""

    name: ClassVar[str] = "musique"

    def questions(self) -> list[Question]:
        from routerag.corpus.datasets import load_dataset

        return load_dataset(self.name).questions

    def synthesise(self, questions: Sequence[Question], k: int) -> list[Synthesised]:
        from routerag.corpus.datasets import data_root

        paragraphs = musique_row_paragraphs(data_root() / "musique_train100" / "musique_train.json")
        return musique_trajectories(questions, paragraphs, k=k, source=self.name)


for _source in (WTQTableSteps, MuSiQueTextSteps):
    STEP_SOURCES.register(_source.name, _source)
