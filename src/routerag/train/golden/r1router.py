"""R1-Router's released step-wise trajectories: each sub-question a search (text retriever ->
``[passage]``, table retriever -> ``[table]``…), its evidence lines as the observation; and their
per-step Step-GRPO rows (:func:`r1_router_step_rows`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from routerag.corpus.schema import Question
from routerag.train.golden.render import render_routerag
from routerag.train.golden.schema import GoldenHop, GoldenTrajectory, gold_hit

R1_ROUTER_MODES = {"text retriever": "passage", "table retriever": "table", "text image retriever": "image"}
_EVIDENCE = re.compile(r"^(ter|tar|tir)-(\d+):\s?(.*)$")
_DIGITS = re.compile(r"(\d+)")


def r1_router_path() -> Path:
    from routerag.corpus.datasets import r1_router_trajectories_path

    return r1_router_trajectories_path()


def read_r1_router(path: str | Path | None = None) -> list[dict[str, Any]]:
    with Path(path or r1_router_path()).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _evidence_lines(problem: str) -> list[tuple[str, str]]:
    body = problem.split("\n\n\n Give me the answer")[0]
    head, _, rest = body.partition("table retriever:")
    lines = (rest or head).split("\n")
    out = []
    for line in lines:
        m = _EVIDENCE.match(line.strip())
        if m:
            out.append(("", m.group(3)))
    return out


def _origin_question(problem: str) -> str:
    m = re.search(r"Origin question:\s*(.*)", problem)
    return m.group(1).strip() if m else problem.strip()


def from_r1_router(record: dict[str, Any], index: int, **render: Any) -> GoldenTrajectory | None:
    """A released R1-Router trajectory rendered in the RouteRAG protocol (text -> [passage],
    table -> [table], text-image -> [image])."""
    steps = record.get("steps") or []
    if not steps or steps[0].get("step_type") != "ret":
        return None
    question = _origin_question(steps[0]["problem"])
    hops: list[GoldenHop] = []
    pending: GoldenHop | None = None
    final: list[str] = []
    for st in steps:
        if st["step_type"] == "ret":
            ans = st["answer"]
            query = str(ans.get("query", "")).strip()
            retriever = (ans.get("retriever") or ["none"])[0].lower()
            if query.lower() in {"none", ""} or retriever == "none":
                pending = None
                continue
            think = "I need to find out: " + query if not hops else f"{hops[-1].think.split(': ', 1)[-1]} is settled. Next: {query}"
            pending = GoldenHop(think=think, mode=R1_ROUTER_MODES.get(retriever, "passage"), query=query)
        elif pending is not None:
            pending.evidence = [gold_hit(line, i + 1) for i, line in enumerate(_evidence_lines(st["problem"]))]
            hops.append(pending)
            pending = None
        else:
            final = [str(a) for a in st["answer"]] if isinstance(st["answer"], list) else [str(st["answer"])]
    if not final or not hops:
        return None
    segments = render_routerag(question, hops, final[0], **render)
    return GoldenTrajectory(qid=f"r1router-{index}", dataset="r1router", question=question, answers=final,
                            source="r1router", segments=segments)


def r1_router_step_rows(path: str | Path | None = None, *, limit: int | None = None,
                        side: Literal["train", "heldout"] | None = None) -> list[dict[str, Any]]:
    """Per-step Step-GRPO prompts of the R1-Router trajectories: ``prompt`` (system + user chat
    messages), ``answers`` (the step's gold answers), ``step`` (JSON: step type and gold) and
    ``trajectory`` (its id). ``side`` keeps the trajectories of one side of the fixed split
    (:mod:`routerag.corpus.r1router_split`); None keeps all."""
    from routerag.corpus.r1router_split import split_ids, trajectory_id

    keep = set(split_ids(side)) if side is not None else None
    rows: list[dict[str, Any]] = []
    for index, record in enumerate(read_r1_router(path)):
        if keep is not None and trajectory_id(index) not in keep:
            continue
        rows += record_step_rows(record, trajectory_id(index))
        if limit is not None and len(rows) >= limit:
            break
    return rows[:limit] if limit is not None else rows


def r1_router_trajectory_questions(path: str | Path | None = None, *,
                                   side: Literal["train", "heldout"] | None = None) -> list[Question]:
    """Each released trajectory of ``side`` (None: all) as a question for the overlap check: its id
    (``r1router-<index>``), its origin question and its final answers."""
    from routerag.corpus.r1router_split import split_ids, trajectory_id

    keep = set(split_ids(side)) if side is not None else None
    out: list[Question] = []
    for index, record in enumerate(read_r1_router(path)):
        steps = record.get("steps") or []
        if not steps or (keep is not None and trajectory_id(index) not in keep):
            continue
        last: Any = next((s["answer"] for s in reversed(steps) if s["step_type"] == "ans"), [])
        answers = [str(a) for a in last] if isinstance(last, list) else [str(last)]
        out.append(Question(qid=trajectory_id(index), question=_origin_question(steps[0]["problem"]), answers=answers,
                            dataset="r1router"))
    return out


def trajectory_order(trajectory: str) -> tuple[tuple[int, str, int], ...]:
    """A sort key for trajectory ids that compares their runs of digits as numbers: ``r1router-9``
    before ``r1router-10``, ``wtq-train:nt-9`` before ``wtq-train:nt-10``, any id form against any
    other (the id itself breaks a tie such as ``x-01`` / ``x-1``)."""
    parts = [(1, "", int(part)) if part.isdigit() else (0, part, 0) for part in _DIGITS.split(trajectory) if part]
    return (*parts, (2, trajectory, 0))


def record_step_rows(record: dict[str, Any], trajectory: str) -> list[dict[str, Any]]:
    """The step rows of one trajectory record in the released format (``{"steps": [{step_type,
    system, problem, answer}]}``): a ``ret`` step's answer is ``{"query", "retriever": [name]}``,
    an ``ans`` step's a string (the last ``ans`` step, the final answer, a list of gold answers)."""
    steps = record.get("steps") or []
    last_ans = max((i for i, s in enumerate(steps) if s["step_type"] == "ans"), default=-1)
    rows: list[dict[str, Any]] = []
    for i, st in enumerate(steps):
        prompt = [{"role": "system", "content": st["system"]}, {"role": "user", "content": st["problem"]}]
        if st["step_type"] == "ret":
            ans = st["answer"]
            extra = {"step_type": "ret", "gold_query": str(ans.get("query", "")).strip(),
                     "gold_retriever": (ans.get("retriever") or ["none"])[0]}
            golds: list[str] = [extra["gold_query"]]
        else:
            answer = st["answer"]
            golds = [str(a) for a in answer] if isinstance(answer, list) else [str(answer).strip()]
            extra = {"step_type": "final" if i == last_ans else "ans", "gold_answer": golds[0]}
        rows.append({"prompt": prompt, "answers": golds, "step": json.dumps(extra), "trajectory": trajectory})
    return rows


_KB_KIND = {"Text Retriever": "general textual knowledge", "Table Retriever": "numbers or facts kept in a table",
            "Text Image Retriever": "a visual detail"}


def r1_router_gold_completion(step: dict[str, Any]) -> str:
    """The gold output of one step (a row's ``step``) in R1-Router's output format: a short
    ``<think>`` that reveals no answer, then ``<sub-question>`` + ``<ret>`` (title-case
    retriever, ``None`` to stop) or ``<answer>``. The released data holds no reasoning text, so
    the ``<think>`` is a fixed sentence per decision."""
    if step["step_type"] == "ret":
        query = " ".join(str(step["gold_query"]).split())
        retriever = str(step["gold_retriever"]).strip().title()
        if query.lower() in {"", "none"} or retriever.lower() == "none":
            think = "The sub-questions answered so far are enough to answer the origin question; no further retrieval is needed."
            query, retriever = "None", "None"
        else:
            kind = _KB_KIND.get(retriever, "general textual knowledge")
            think = f"The next single-hop fact the origin question needs asks for {kind}, so the {retriever} fits."
        return f"<think>\n{think}\n</think>\n<sub-question>\n{query}\n</sub-question>\n<ret>\n{retriever}\n</ret>"
    answer = " ".join(str(step["gold_answer"]).split())
    think = ("The retrieved information answers the question." if step["step_type"] == "ans"
             else "The answers to the sub-questions together answer the origin question.")
    return f"<think>\n{think}\n</think>\n<answer>\n{answer}\n</answer>"
