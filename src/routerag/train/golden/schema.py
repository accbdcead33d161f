"""Golden trajectories and hops: the records every golden source produces."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from routerag.corpus.schema import Document
from routerag.trace import Hit, Segment

ModePolicy = Literal["passage", "bridge-graph"]
GoldenProtocol = Literal["routerag", "graphrag-r1"]
GOLDEN_PROTOCOLS: tuple[GoldenProtocol, ...] = ("routerag", "graphrag-r1")


class GoldenTrajectory(BaseModel):
    qid: str
    dataset: str
    question: str
    answers: list[str]
    source: str  # musique | hotpotqa | r1router | rejection
    segments: list[Segment]
    protocol: GoldenProtocol = "routerag"  # the tag protocol the segments are written in
    system: str | None = None  # the episode's system message (the prompt segment is its user message), if it has one

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


def gold_hit(doc: Document | tuple[str, str], rank: int = 1, source: str = "passage") -> Hit:
    """A gold paragraph as a hit of ``source`` at ``rank`` (score 1.0): a corpus document keeps its id, a
    ``(title, text)`` pair is ``gold-<rank>``."""
    title, text = (doc.title, doc.text) if isinstance(doc, Document) else doc
    doc_id = doc.doc_id if isinstance(doc, Document) else f"gold-{rank}"
    return Hit(doc_id=doc_id, title=title, text=text, score=1.0, source=source, mode=source, rank=rank)
