"""Whether a golden trajectory's observations hold its answer.

A trajectory teaches reading only when the evidence it shows contains what its answer says. One
rendered from stored queries over real retrieval (``routerag golden --rerender``) may not: the
episode's retrieval can miss the paragraph the answer comes from, and a model trained on such a
row learns to answer without the evidence. :func:`answer_support` tells the three cases apart;
yes/no answers are not spans of any passage, so they are neither supported nor unsupported.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, Field

from routerag.corpus.normalize import normalize_answer
from routerag.eval.metrics import cover_em
from routerag.train.golden.schema import GoldenTrajectory

Support = Literal["supported", "unsupported", "not_a_span"]
NOT_SPANS = frozenset({"yes", "no"})


def answer_support(trajectory: GoldenTrajectory) -> Support:
    """``supported`` when a gold answer (normalised as EM normalises) occurs, on word boundaries,
    in the trajectory's observations (cover-EM over them); ``not_a_span`` for yes/no answers; else ``unsupported``."""
    spans = [a for a in trajectory.answers if normalize_answer(a) and normalize_answer(a) not in NOT_SPANS]
    if not spans:
        return "not_a_span"
    seen = " ".join(s.text for s in trajectory.segments if s.kind == "observation")
    return "supported" if cover_em(seen, spans) else "unsupported"


class SupportStats(BaseModel):
    """How many trajectories of each source fall in each :data:`Support` case."""

    by_source: dict[str, dict[str, int]] = Field(default_factory=dict)


def support_stats(trajectories: Iterable[GoldenTrajectory]) -> SupportStats:
    counts: dict[str, Counter[str]] = {}
    for t in trajectories:
        counts.setdefault(t.source, Counter())[answer_support(t)] += 1
    return SupportStats(by_source={src: dict(sorted(c.items())) for src, c in counts.items()})


def keep_supported(trajectories: Iterable[GoldenTrajectory]) -> list[GoldenTrajectory]:
    """The trajectories whose answer the evidence holds, and the yes/no ones."""
    return [t for t in trajectories if answer_support(t) != "unsupported"]
