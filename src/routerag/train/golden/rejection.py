"""Rejection sampling: policy rollouts that reach the gold answer kept as golden trajectories."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from routerag.corpus.schema import Question
from routerag.eval.metrics import METRICS
from routerag.trace import Segment
from routerag.train.golden.schema import GoldenTrajectory


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
                prefix = env.episode(q.question).rules.prefix
                segments = [Segment(kind="prompt", text=env.user_prompt(q.question) + prefix), *r.trace.segments[1:]]
                kept.append(GoldenTrajectory(qid=q.qid, dataset=q.dataset, question=q.question, answers=q.answers,
                                             source="rejection", segments=segments))
                break
    return kept
