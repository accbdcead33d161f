"""MuSiQue gold decompositions as golden hops: one search per hop (``#k`` replaced by the k-th
hop's answer), the hop's supporting paragraph as the evidence."""

from __future__ import annotations

import re
from typing import Any

from routerag.corpus.schema import Document, Question
from routerag.train.golden.grounding import Grounder
from routerag.train.golden.render import from_hops
from routerag.train.golden.schema import GoldenHop, GoldenTrajectory, ModePolicy, gold_hit

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
        hops.append(GoldenHop(think=think, mode=mode, query=query, evidence=[gold_hit(docs[sub.supporting_doc_ids[0]])]))
        answers.append(sub.answer)
    return hops, f"The answer is {answers[-1]}."


def from_musique(q: Question, docs: dict[str, Document], *, mode_policy: ModePolicy = "bridge-graph",
                 ground: Grounder | None = None, **render: Any) -> GoldenTrajectory | None:
    """A trajectory from a MuSiQue question's gold decomposition (None when a hop lacks support)."""
    return from_hops(q, musique_hops(q, docs, mode_policy), "musique", ground=ground, **render)
