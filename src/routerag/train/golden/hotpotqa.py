"""HotpotQA supporting facts as golden hops (HotpotQA and the HotpotQA-distractor training pool):
one search per supporting title (the question first, then the bridge title), that title's passage
as the evidence."""

from __future__ import annotations

from typing import Any

from routerag.corpus.schema import Document, Question
from routerag.train.golden.grounding import Grounder
from routerag.train.golden.render import from_hops
from routerag.train.golden.schema import GoldenHop, GoldenTrajectory, ModePolicy, gold_hit


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
        hops.append(GoldenHop(think=think, mode=mode, query=query, evidence=[gold_hit(by_title[title])]))
    return hops, ""


def from_hotpotqa(q: Question, docs: dict[str, Document], *, mode_policy: ModePolicy = "bridge-graph",
                  ground: Grounder | None = None, **render: Any) -> GoldenTrajectory | None:
    """A trajectory from a HotpotQA question's supporting facts (see :func:`hotpotqa_hops`)."""
    return from_hops(q, hotpotqa_hops(q, docs, mode_policy), "hotpotqa", ground=ground, **render)
