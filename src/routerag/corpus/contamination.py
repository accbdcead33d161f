"""Overlap of training questions with evaluation sets (contamination): :func:`check_overlap`
keeps training questions out of evaluation sets."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from routerag.corpus.normalize import normalize_answer
from routerag.corpus.schema import Question


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
