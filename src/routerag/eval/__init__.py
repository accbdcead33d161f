"""Evaluation: answer metrics (shared with training rewards), cost and routing metrics from
traces, the resumable runner, reports, plots and the paired bootstrap.

``metrics``/``normalize`` are light to import; ``runner``, ``report`` and ``plots`` are imported
from their modules where needed."""

from routerag.corpus.normalize import normalize_answer
from routerag.eval.metrics import (
    DEFAULT_METRICS,
    METRICS,
    LLMJudge,
    cover_em,
    exact_match,
    f1_recall,
    score_answer,
    semantic_similarity,
    token_f1,
    token_precision,
)

__all__ = [
    "DEFAULT_METRICS",
    "METRICS",
    "LLMJudge",
    "cover_em",
    "exact_match",
    "f1_recall",
    "normalize_answer",
    "score_answer",
    "semantic_similarity",
    "token_f1",
    "token_precision",
]
