"""A stored set of synthesised, grounded step-wise R1-Router trajectories and its statistics
(``routerag golden-steps``; the sources: :mod:`routerag.train.golden.r1router_synth`).

Files in the output folder:

* ``trajectories.jsonl``: one trajectory a line, in the released trajectories' format (``steps``:
  ``step_type``, ``system``, ``problem``, ``answer``) with its ``id``, ``source``, ``question`` and
  ``answers``;
* ``steps.jsonl``: their step rows, the rows ``r1-router-step`` / ``r1-router-sft`` train on
  (:func:`~routerag.train.golden.r1router.record_step_rows`: ``prompt``, ``answers``, ``step``,
  ``trajectory``);
* ``steps_stats.json``: per source the questions, those dropped as overlapping the evaluation
  sets (checked when the questions are loaded, before sampling), those considered (``N`` evenly
  spaced of the rest), kept, dropped by reason, the hop whose retrieval missed, hops per
  trajectory and rows by step kind; in all, rows by step kind and decompose steps by knowledge
  base; the overlap check of the kept trajectories;
* ``parts/``: each source's outcomes under a key of its settings, so that a run stopped midway
  resumes with the sources it finished (the output is the same either way: every step is
  deterministic).

The recipes ``r1-router-sft`` and ``r1-router-step`` train on such folders beside the released
steps (their ``golden_steps`` setting, :func:`r1_router_training_steps`): each trajectory is checked
against the run's evaluation sets and the released held-out trajectories again at load, and its
rows are training rows only.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from routerag.config import atomic_write_text, fingerprint
from routerag.corpus.contamination import check_overlap, eval_set_questions
from routerag.corpus.sampling import evenly_spaced
from routerag.corpus.schema import Question, SubQuestion
from routerag.train.golden.r1router import r1_router_step_rows, r1_router_trajectory_questions, record_step_rows
from routerag.train.golden.r1router_synth import STEP_SOURCES, Synthesised

TRAJECTORIES_FILE = "trajectories.jsonl"
STEPS_FILE = "steps.jsonl"
STATS_FILE = "steps_stats.json"
PARTS_DIR = "parts"
DEFAULT_K = 5  # the r1-router strategy's documents per sub-question
SYNTH_REVISION = 2  # part of the key of parts/: raise it when what a source synthesises changes
# 2: earlier sub-questions and answers shown as the strategy shows a policy's gold outputs (each on its own line)


class SourceStepStats(BaseModel):
    questions: int  # the source's training questions
    eval_overlap: int  # dropped as overlapping the evaluation sets (before sampling)
    overlap_reasons: dict[str, int] = Field(default_factory=dict)  # question+answer | id | hop -> questions
    considered: int  # evenly spaced among the rest (all of them without a limit)
    kept: int
    dropped: dict[str, int] = Field(default_factory=dict)  # reason -> questions (of the considered)
    failed_hop: dict[int, int] = Field(default_factory=dict)  # retrieval missed at this 1-based hop -> questions
    hops: dict[int, int] = Field(default_factory=dict)  # retrieval hops per kept trajectory -> trajectories
    steps: dict[str, int] = Field(default_factory=dict)  # step kind (ret / ans / final) -> rows
    reused: bool = False  # read back from parts/ (an earlier run with the same settings)


class StepSetStats(BaseModel):
    sources: list[str]
    eval_sets: list[str]
    k: int
    retrieval: str = "bm25"
    trajectories: int
    steps: int
    steps_by_kind: dict[str, int]  # ret / ans / final -> rows
    routes: dict[str, int]  # decompose steps by gold knowledge base (none: the stop step)
    by_source: dict[str, SourceStepStats]
    overlap_checked: dict[str, Any] | None = None  # the kept trajectories against eval_sets (empty "overlapping")
    command: str = ""


def parse_source(spec: str) -> tuple[str, int | None]:
    """``NAME`` or ``NAME:N`` (N evenly spaced questions) -> (name, N)."""
    name, _, n = spec.partition(":")
    if n and not n.isdigit():
        raise ValueError(f"source {spec!r}: expected NAME or NAME:N with N a number of questions")
    if name not in STEP_SOURCES:
        raise ValueError(f"unknown step source {name!r}; valid: {', '.join(STEP_SOURCES.names())}")
    return name, int(n) if n else None


def _part_key(name: str, limit: int | None, k: int, eval_sets: Sequence[str]) -> str:
    return fingerprint({"source": name, "limit": limit, "k": k, "eval_sets": sorted(eval_sets),
                        "revision": SYNTH_REVISION})[:12]


def _read_part(path: Path) -> tuple[dict[str, Any], list[Synthesised]] | None:
    if not path.is_file():
        return None
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        return None
    head = json.loads(lines[0])
    return head, [Synthesised.model_validate_json(line) for line in lines[1:] if line.strip()]


def _write_part(path: Path, head: dict[str, Any], outcomes: Sequence[Synthesised]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "".join([json.dumps(head) + "\n", *(o.model_dump_json() + "\n" for o in outcomes)]))


def source_outcomes(name: str, limit: int | None, *, k: int, eval_questions: Sequence[Question],
                    ) -> tuple[list[Synthesised], dict[str, Any]]:
    """One source's outcomes and its question counts: its questions minus those overlapping
    ``eval_questions``, ``limit`` of the rest evenly spaced, each synthesised or dropped."""
    source = STEP_SOURCES.get(name)()
    questions = source.questions()
    report = check_overlap(questions, list(eval_questions)) if eval_questions else None
    bad = set(report.overlapping) if report is not None else set()
    clean = [q for q in questions if q.qid not in bad]
    considered = evenly_spaced(clean, limit)
    outcomes = source.synthesise(considered, k)
    head = {"questions": len(questions), "eval_overlap": len(bad), "considered": len(considered),
            "overlap_reasons": dict(Counter(report.reasons.values())) if report is not None else {}}
    return outcomes, head


def _source_stats(head: dict[str, Any], outcomes: Sequence[Synthesised], rows: Sequence[dict[str, Any]],
                  reused: bool) -> SourceStepStats:
    kept = [o for o in outcomes if o.record is not None]
    hops = Counter(sum(s["step_type"] == "ret" for s in o.record["steps"]) - 1 for o in kept if o.record is not None)
    return SourceStepStats(
        questions=head["questions"], eval_overlap=head["eval_overlap"], overlap_reasons=head.get("overlap_reasons", {}),
        considered=head["considered"], kept=len(kept),
        dropped=dict(sorted(Counter(o.dropped for o in outcomes if o.dropped).items())),
        failed_hop=dict(sorted(Counter(o.failed_hop for o in outcomes if o.failed_hop).items())),
        hops=dict(sorted(hops.items())),
        steps=dict(Counter(json.loads(r["step"])["step_type"] for r in rows)), reused=reused)


def build_step_set(sources: Sequence[str], out_dir: str | Path, *, eval_sets: Sequence[str], k: int = DEFAULT_K,
                   command: str = "") -> StepSetStats:
    """Synthesise the trajectories of ``sources`` (``NAME`` or ``NAME:N``; evaluation overlap
    dropped at load) and write them, their step rows and their statistics into ``out_dir``; a
    source finished by an earlier run with the same settings is read back from ``parts/``."""
    if k < 1:
        raise ValueError("k must be at least 1")
    parsed = [parse_source(s) for s in sources]
    out = Path(out_dir)
    eval_questions = eval_set_questions(list(eval_sets)) if eval_sets else []
    records: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    by_source: dict[str, SourceStepStats] = {}
    for name, limit in parsed:
        part = out / PARTS_DIR / f"{name}-{_part_key(name, limit, k, eval_sets)}.jsonl"
        stored = _read_part(part)
        if stored is not None:
            head, outcomes = stored
        else:
            outcomes, head = source_outcomes(name, limit, k=k, eval_questions=eval_questions)
            _write_part(part, head, outcomes)
        mine = [o.record for o in outcomes if o.record is not None]
        source_rows = [row for r in mine for row in record_step_rows(r, r["id"])]
        by_source[name] = _source_stats(head, outcomes, source_rows, reused=stored is not None)
        records += mine
        rows += source_rows
    overlap = None
    if eval_questions:
        report = check_overlap([trajectory_question(r) for r in records], list(eval_questions))
        if report.overlapping:
            raise ValueError(f"synthesised trajectories overlap the evaluation sets: {report.overlapping[:5]}")
        overlap = report.model_dump()
    steps = [json.loads(r["step"]) for r in rows]
    stats = StepSetStats(
        sources=list(sources), eval_sets=list(eval_sets), k=k, trajectories=len(records), steps=len(rows),
        steps_by_kind=dict(Counter(s["step_type"] for s in steps)),
        routes=dict(Counter(s["gold_retriever"] for s in steps if s["step_type"] == "ret")),
        by_source=by_source, overlap_checked=overlap, command=command)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / TRAJECTORIES_FILE, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    atomic_write_text(out / STEPS_FILE, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    atomic_write_text(out / STATS_FILE, json.dumps(json.loads(stats.model_dump_json()), indent=2) + "\n")
    return stats


def read_step_rows(path: str | Path) -> list[dict[str, Any]]:
    """The step rows of a ``steps.jsonl`` file (or of the folder holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / STEPS_FILE
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read_step_set(path: str | Path) -> list[dict[str, Any]]:
    """The trajectory records of a stored step set: a ``routerag golden-steps`` folder (its
    ``trajectories.jsonl``) or that file. A line that is no synthesised trajectory (``id``,
    ``question``, ``answers``, ``steps``) is a :class:`ValueError` naming the file and line."""
    path = Path(path)
    file = path / TRAJECTORIES_FILE if path.is_dir() else path
    if not file.is_file():
        raise FileNotFoundError(f"{path}: no step set (a routerag golden-steps folder or its {TRAJECTORIES_FILE})")
    records: list[dict[str, Any]] = []
    for n, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        record = json.loads(line)
        if (not isinstance(record, dict) or not record.get("id") or not isinstance(record.get("question"), str)
                or not isinstance(record.get("answers"), list) or not isinstance(record.get("steps"), list)):
            raise ValueError(f"{file}:{n}: not a synthesised trajectory (id, question, answers, steps)")
        records.append(record)
    return records


def trajectory_question(record: dict[str, Any]) -> Question:
    """A synthesised trajectory as the question the overlap check compares: the source's question
    id (``musique:<id>`` -> ``<id>``), its question and answers, and as its decomposition each
    retrieval step's sub-question with the answer of the step after it."""
    steps = record["steps"]
    hops = [SubQuestion(question=str(ret["answer"]["query"]), answer=ans["answer"])
            for ret, ans in zip(steps, steps[1:])
            if ret["step_type"] == "ret" and ans["step_type"] == "ans" and isinstance(ret["answer"], dict)
            and str(ret["answer"].get("query", "none")).strip().lower() != "none" and isinstance(ans["answer"], str)]
    return Question(qid=str(record["id"]).split(":", 1)[-1], question=record["question"],
                    answers=[str(a) for a in record["answers"]], decomposition=hops)


@dataclass
class TrainingSteps:
    """The step rows an R1-Router recipe trains on (:func:`r1_router_training_steps`)."""

    rows: list[dict[str, Any]]  # prompt, answers, step, trajectory
    origin: dict[str, str]  # trajectory id -> "released" or the step set it comes from
    note: dict[str, Any] = field(default_factory=dict)  # per step set: trajectories, rows by kind; the overlap check

    def by_origin(self, items: Sequence[tuple[str, str]]) -> dict[str, dict[str, int]]:
        """(trajectory id, step kind) pairs counted by origin, then kind."""
        out: dict[str, Counter[str]] = {}
        for trajectory, kind in items:
            out.setdefault(self.origin[trajectory], Counter())[kind] += 1
        return {where: dict(counts) for where, counts in out.items()}


def r1_router_training_steps(side: Literal["train", "heldout"] | None, step_sets: Sequence[str | Path],
                             eval_sets: Sequence[str]) -> TrainingSteps:
    """The step rows an R1-Router recipe trains on: the released steps of ``side`` (None: all;
    :func:`~routerag.train.golden.r1router.r1_router_step_rows`), then those of each stored step
    set (``routerag golden-steps``, :func:`read_step_set`), which only ever add training rows (the
    released split is untouched).

    Every synthesised trajectory is checked (:func:`~routerag.corpus.contamination.check_overlap`,
    :func:`trajectory_question`) against ``eval_sets`` and, with ``side="train"``, against the
    released held-out trajectories; one that overlaps is a :class:`ValueError`, as a stored golden
    set's is (``sft.golden_set``): the set was built against other evaluation sets and is built
    again with their ``--exclude``. So is a trajectory id found twice (in two sets, or a released id)."""
    rows = r1_router_step_rows(side=side)
    origin = {r["trajectory"]: "released" for r in rows}
    if not step_sets:
        return TrainingSteps(rows=rows, origin=origin)
    questions: list[Question] = []
    per_set: dict[str, dict[str, Any]] = {}
    synthesised: list[dict[str, Any]] = []
    for path in step_sets:
        records = read_step_set(path)
        for record in records:
            trajectory = str(record["id"])
            if trajectory in origin:
                where = "the released trajectories" if origin[trajectory] == "released" else f"step set {origin[trajectory]}"
                raise ValueError(f"trajectory {trajectory} of step set {path} is in {where} too")
            origin[trajectory] = str(path)
        set_rows = [row for r in records for row in record_step_rows(r, str(r["id"]))]
        per_set[str(path)] = {"trajectories": len(records), "rows": len(set_rows),
                              "by_step_type": dict(Counter(json.loads(r["step"])["step_type"] for r in set_rows))}
        questions += [trajectory_question(r) for r in records]
        synthesised += set_rows
    heldout = r1_router_trajectory_questions(side="heldout") if side == "train" else []
    report = check_overlap(questions, [*eval_set_questions(list(eval_sets)), *heldout])
    if report.overlapping:
        first = report.overlapping[:5]
        raise ValueError(f"{len(report.overlapping)} synthesised trajectories overlap the evaluation sets {list(eval_sets)}"
                         f"{' or the released held-out trajectories' if heldout else ''} (e.g. "
                         f"{', '.join(f'{q}: {report.reasons[q]}' for q in first)}): build the step set again with "
                         "routerag golden-steps --exclude NAME for each of them")
    note = {"golden_steps": per_set,
            "overlap_checked": {"eval_sets": list(eval_sets), "heldout_trajectories": len(heldout), **report.model_dump()}}
    return TrainingSteps(rows=rows + synthesised, origin=origin, note=note)
