"""Golden trajectories from named sources, minus the questions overlapping evaluation sets."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from routerag.corpus.contamination import check_overlap, eval_set_questions
from routerag.corpus.schema import Question
from routerag.train.golden.grounding import Grounder
from routerag.train.golden.hotpotqa import hotpotqa_hops
from routerag.train.golden.musique import musique_hops
from routerag.train.golden.r1router import from_r1_router, read_r1_router
from routerag.train.golden.render import from_hops
from routerag.train.golden.schema import GoldenHop, GoldenTrajectory, ModePolicy

GOLDEN_HOPS: dict[str, Callable[..., tuple[list[GoldenHop], str] | None]] = {
    "musique": musique_hops,
    "hotpotqa": hotpotqa_hops,
    # the 600 train + dev questions of HotpotQA distractor over their pooled training corpus
    "hotpotqa-distractor-train": hotpotqa_hops,
}
GOLDEN_SOURCES = (*GOLDEN_HOPS, "r1router")


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
