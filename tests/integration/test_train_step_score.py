"""Scoring a policy on R1-Router's released steps with the Step-GRPO reward's parts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from routerag.llm.scripted import ScriptedModel
from routerag.train.golden.r1router import r1_router_gold_completion
from routerag.train.rewards import R1RouterStepRewardParams
from routerag.train.step_score import score_steps, summarize_steps

PARAMS = R1RouterStepRewardParams(similarity="token_f1")


def _row(step: dict, gold: str) -> dict:
    prompt = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    return {"prompt": prompt, "answers": [gold], "step": json.dumps(step), "trajectory": "r1router-0"}


ROWS = [
    _row({"step_type": "ret", "gold_query": "who directed x?", "gold_retriever": "text retriever"}, "who directed x?"),
    _row({"step_type": "ret", "gold_query": "none", "gold_retriever": "none"}, "none"),
    _row({"step_type": "ans", "gold_answer": "frank wisbar"}, "frank wisbar"),
    _row({"step_type": "final", "gold_answer": "9 December 1899"}, "9 December 1899"),
]


def test_gold_completions_score_full_marks(tmp_path: Path) -> None:
    outputs = [r1_router_gold_completion(json.loads(r["step"])) for r in ROWS]
    records = score_steps(ScriptedModel(outputs), ROWS, tmp_path / "steps.jsonl", params=PARAMS)
    assert [r["reward"] for r in records] == [1.0, 1.0, 1.0, 1.0]
    summary = summarize_steps(records)
    assert summary["ret"] == {"steps": 2, "format_errors_pct": 0.0, "routing_pct": 100.0, "query_similarity_pct": 100.0,
                              "reward_pct": 100.0}
    assert summary["final"]["accuracy_pct"] == 100.0 and summary["ans"]["f1_recall_pct"] == 100.0


def test_wrong_and_broken_outputs_and_resume(tmp_path: Path) -> None:
    wrong_kb = "<think>\nx\n</think>\n<sub-question>\nwho directed x?\n</sub-question>\n<ret>\nTable Retriever\n</ret>"
    placeholder = "<sub-question>\n[Exactly ONE single-hop question one time."  # no closing tags
    out = tmp_path / "steps.jsonl"
    first = score_steps(ScriptedModel([wrong_kb, placeholder]), ROWS[:2], out, params=PARAMS)
    assert [(r["format"], r["routing"], r["reward"]) for r in first] == [(1.0, 0.0, 0.5), (0.0, 0.0, 0.0)]
    # resumed: the two scored steps are read back, only the rest is asked
    answers = ["<think> t </think><answer> it was frank wisbar </answer>", "<think> t </think><answer> 1900 </answer>"]
    records = score_steps(ScriptedModel(answers), ROWS, out, params=PARAMS)
    assert len(records) == 4 and len(out.read_text().splitlines()) == 4
    assert [r["reward"] for r in records] == [0.5, 0.0, 1.0, 0.0]
    summary = summarize_steps(records)
    assert summary["ret"]["format_errors_pct"] == 50.0 and summary["ret"]["routing_pct"] == 0.0
    assert summary["final"]["accuracy_pct"] == 0.0


@pytest.mark.data
def test_gold_completion_format_of_every_released_step() -> None:
    from routerag.strategies.r1_router import parse_sub_question
    from routerag.train.golden.r1router import r1_router_step_rows

    retrievers = ["Text Retriever", "Text Image Retriever", "Table Retriever"]
    for row in r1_router_step_rows(side="train"):
        step = json.loads(row["step"])
        if step["step_type"] != "ret":
            continue
        parsed = parse_sub_question(r1_router_gold_completion(step), retrievers, "q", False, 300)
        assert not parsed.errors  # what the r1-router-step strategy reads without a format error
        stop = step["gold_query"].lower() in {"", "none"}
        assert (parsed.query is None) == stop
        if not stop:
            assert parsed.retriever == step["gold_retriever"].title()
