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
the TRL recipes — for a verl run whose rollout is not routerag's agent loop (Search-R1's own).
With routerag's agent loop, :mod:`routerag.train.verl.reward` scores the episodes it recorded
(RouteRAG's batch-normalised accuracy–efficiency stage included; see ``docs/guides/training-gpu.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from routerag.corpus.schema import Question
from routerag.protocol.routerag_tags import ANSWER_CLOSE, ANSWER_OPEN, extract_tag
from routerag.strategies.prompts import routerag_prompt

ABILITY = "fact-reasoning"
ENV_VERL_DATA = "ROUTERAG_VERL_DATA"
DEFAULT_VERL_DATA = Path("data") / "verl"


def verl_data_path(dataset: str, out_dir: str | Path | None = None) -> Path:
    """Where ``routerag export-verl --dataset NAME`` writes by default, and where the verl configs
    (configs/train/verl/) read: ``<out_dir or $ROUTERAG_VERL_DATA or data/verl>/<NAME>.parquet``
    (``file:`` datasets by their file's stem)."""
    import os

    root = Path(out_dir) if out_dir is not None else Path(os.environ.get(ENV_VERL_DATA) or DEFAULT_VERL_DATA)
    name = Path(dataset.removeprefix("file:")).stem if dataset.startswith("file:") else dataset.replace(":", "_").replace("/", "_")
    return root / f"{name}.parquet"


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


def extract_answer(solution_str: str) -> str | None:
    """The last ``<answer>`` of the response (verl hands a reward the response without its prompt;
    an answer cut before its closing tag counts), or None."""
    answer = (extract_tag(solution_str, ANSWER_OPEN, ANSWER_CLOSE, last=True) or "").strip()
    return answer or None


def compute_score(data_source: str, solution_str: str, ground_truth: dict[str, Any] | Sequence[str] | str,
                  extra_info: dict[str, Any] | None = None, *, metric: str = "em", format_score: float = 0.0) -> float:
    """verl reward: the metric of the last answer against ``ground_truth['target']``; no answer
    scores 0, a wrong answer ``format_score``."""
    from routerag.eval.metrics import METRICS

    answer = extract_answer(solution_str)
    if answer is None:
        return 0.0
    targets = ground_truth.get("target", []) if isinstance(ground_truth, dict) else ground_truth
    golds = [targets] if isinstance(targets, str) else [str(t) for t in targets or []]
    score = float(METRICS.get(metric)(answer, golds)) if golds else 0.0
    return score if score > 0 else format_score
