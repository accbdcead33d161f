"""Scores a policy on R1-Router's released steps of every kind with the Step-GRPO reward's parts.

``routerag eval --dataset r1router-steps-heldout --strategy r1-router-step`` measures the
decompose-and-route steps; the intermediate-answer and final-answer steps have no strategy of
their own. :func:`score_steps` answers each step row (:func:`~routerag.train.golden.r1router.r1_router_step_rows`:
the released system + user prompt) once with a chat model and scores the output with
:func:`~routerag.train.rewards.r1_router_step_components`: ``format`` (the gate), ``routing`` and
``query_similarity`` for a ret step, ``f1_recall`` for an intermediate answer, ``accuracy`` for
the final answer, and the gated ``reward``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from routerag.llm.base import ChatModel, GenerationParams, Message
from routerag.trace import Segment, Trace
from routerag.train.rewards import R1RouterStepRewardParams, RewardSample, r1_router_step_components, r1_router_step_reward


def score_step(model: ChatModel, row: dict[str, Any], params: R1RouterStepRewardParams,
               generation: GenerationParams) -> dict[str, Any]:
    """One step row answered by ``model`` and scored: its kind, gold, output, components, reward, seconds."""
    messages = [Message(role=m["role"], content=m["content"]) for m in row["prompt"]]
    t0 = time.perf_counter()
    response = model.chat(messages, generation)
    seconds = time.perf_counter() - t0
    extra = json.loads(row["step"]) if isinstance(row["step"], str) else dict(row["step"])
    prompt = "\n\n".join(m.content for m in messages)
    trace = Trace(question=prompt, strategy="r1-router-step",
                  segments=[Segment(kind="prompt", text=prompt), Segment(kind="model", text=response.text)])
    sample = RewardSample(trace=trace, golds=list(row["answers"]), extra=extra)
    parts = r1_router_step_components(sample, params)
    (reward,) = r1_router_step_reward([sample], params)
    return {"trajectory": row.get("trajectory"), "step_type": extra["step_type"], "gold": row["answers"][0],
            "output": response.text, **parts, "reward": reward, "seconds": round(seconds, 2)}


def score_steps(model: ChatModel, rows: Sequence[dict[str, Any]], out: Path, *, params: R1RouterStepRewardParams | None = None,
                generation: GenerationParams | None = None, progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """Every row scored into ``out`` (JSONL, one record per step in row order); a file holding the
    first records already is resumed from where it stops."""
    params = params or R1RouterStepRewardParams()
    generation = generation or GenerationParams(max_tokens=256, temperature=0.0)
    done = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()] if out.is_file() else []
    with out.open("a", encoding="utf-8") as handle:
        for i, row in enumerate(rows[len(done):], start=len(done)):
            record = score_step(model, row, params, generation)
            handle.write(json.dumps(record) + "\n")
            handle.flush()
            done.append(record)
            if progress is not None:
                progress(i + 1, len(rows))
    return done


def summarize_steps(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per step kind: steps, format errors %, and the mean (in %) of each of its components."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_kind.setdefault(r["step_type"], []).append(r)
    out: dict[str, dict[str, float]] = {}
    for kind, rows in by_kind.items():
        n = len(rows)
        keys = [k for k in ("routing", "query_similarity", "f1_recall", "accuracy", "reward") if k in rows[0]]
        out[kind] = {"steps": n, "format_errors_pct": round(100 * sum(not r["format"] for r in rows) / n, 1),
                     **{f"{k}_pct": round(100 * sum(r[k] for r in rows) / n, 1) for k in keys}}
    return out
