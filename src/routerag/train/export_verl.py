"""Training data for verl / Search-R1, and the matching rule-based reward module.

:func:`export_parquet` writes one row per question in the Search-R1 schema::

    data_source   str            the dataset name (selects the reward in verl's reward manager)
    prompt        list[message]  [{"role": "user", "content": RouteRAG's prompt}]
    ability       str            "fact-reasoning"
    reward_model  struct         {"style": "rule", "ground_truth": {"target": [answers...]}}
    extra_info    struct         {"split", "index", "qid", "question"}

:func:`compute_score` has verl's custom reward signature
(``custom_reward_function.path=.../export_verl.py``, ``name=compute_score``) and scores the last
``<answer>`` of the response with :mod:`routerag.eval.metrics` — the same EM as evaluation and as
the TRL recipes. Retrieval costs are not visible to a verl reward function (it sees text), so the
accuracy–efficiency stage needs verl's batch-level reward manager (documented in
``docs/training.md``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from routerag.corpus.schema import Question
from routerag.eval.metrics import METRICS
from routerag.protocol.routerag_tags import ANSWER_CLOSE, ANSWER_OPEN
from routerag.strategies.prompts import routerag_prompt

ABILITY = "fact-reasoning"


def verl_rows(questions: Sequence[Question], data_source: str, *, split: str = "train", few_shot: bool = False) -> list[dict[str, Any]]:
    return [
        {
            "data_source": data_source,
            "prompt": [{"role": "user", "content": routerag_prompt(q.question, few_shot=few_shot)}],
            "ability": ABILITY,
            "reward_model": {"style": "rule", "ground_truth": {"target": list(q.answers)}},
            "extra_info": {"split": split, "index": i, "qid": q.qid, "question": q.question},
        }
        for i, q in enumerate(questions)
    ]


def export_parquet(questions: Sequence[Question], path: str | Path, data_source: str, *, split: str = "train",
                   few_shot: bool = False) -> Path:
    """Write ``questions`` as a verl/Search-R1 parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(verl_rows(questions, data_source, split=split, few_shot=few_shot))
    pq.write_table(table, path)
    return path


_ANSWER = re.compile(f"{re.escape(ANSWER_OPEN)}(.*?){re.escape(ANSWER_CLOSE)}", re.DOTALL)


def extract_answer(solution_str: str) -> str | None:
    """The last ``<answer>…</answer>`` of the response (after the chat's assistant marker when
    the prompt is included)."""
    marker = "<|im_start|>assistant"
    if marker in solution_str:
        solution_str = solution_str.split(marker, 1)[1]
    matches = _ANSWER.findall(solution_str)
    return matches[-1].strip() if matches else None


def compute_score(data_source: str, solution_str: str, ground_truth: dict[str, Any] | Sequence[str] | str,
                  extra_info: dict[str, Any] | None = None, *, metric: str = "em", format_score: float = 0.0) -> float:
    """verl reward: the metric of the last answer against ``ground_truth['target']``; no answer
    scores 0, a wrong answer ``format_score``."""
    targets = ground_truth.get("target", []) if isinstance(ground_truth, dict) else ground_truth
    targets = [targets] if isinstance(targets, str) else [str(t) for t in targets]
    answer = extract_answer(solution_str)
    if answer is None or not targets:
        return 0.0
    score = float(METRICS.get(metric)(answer, targets))
    return score if score > 0 else format_score
