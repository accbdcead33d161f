"""A stored set of golden trajectories and its statistics: ``golden.jsonl.gz`` (one
:class:`~routerag.train.golden.GoldenTrajectory` per line) and ``golden_stats.json`` next to it —
counts by source, hops per trajectory, the mode of each search by hop position, how the hops were
grounded (gold retrieved by the planned mode, found by another mode, or injected), the overlap
check against the evaluation sets, and the question forms. Built by ``routerag golden``; a stored
set is rendered in another tag protocol by ``routerag golden --rerender`` (:func:`rerender_golden_set`:
each trajectory's observations from that protocol's episode over its own dataset's index)."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from routerag.config import atomic_write_text
from routerag.corpus.contamination import check_overlap
from routerag.corpus.question_types import question_form
from routerag.corpus.schema import Question
from routerag.protocol.graphrag_r1_tags import QUERY_OPEN
from routerag.protocol.routerag_tags import SEARCH_OPEN
from routerag.train.golden import (
    EpisodeReplay,
    GoldenProtocol,
    GoldenTrajectory,
    Grounder,
    GroundingStats,
    ModePolicy,
    golden_trajectories,
    rerender,
)

TRAJECTORIES_FILE = "golden.jsonl.gz"
STATS_FILE = "golden_stats.json"

_SEARCH = re.compile(re.escape(SEARCH_OPEN) + r"\s*\[([a-z]+)\]")  # the first mode tag of each search


class RenderingStats(BaseModel):
    """How the trajectories of one source were rendered in another protocol (``rerender_golden_set``)."""

    stored: int  # the source's trajectories in the stored set
    rendered: int
    dropped: dict[str, int] = Field(default_factory=dict)  # why the others were not: the episode's finish -> count
    searches: int = 0  # the searches the rendered episodes ran (their observations)


class GoldenSetStats(BaseModel):
    sources: list[str]
    eval_sets: list[str]
    grounded: bool
    trajectories: int
    by_source: dict[str, int]
    hops: dict[str, dict[int, int]]  # source -> searches per trajectory -> trajectories
    modes_by_hop: dict[int, dict[str, int]]  # hop position (1-based) -> mode -> searches
    forms: dict[str, dict[str, int]]  # source -> question form -> trajectories
    grounding: dict[str, GroundingStats] = Field(default_factory=dict)  # source -> how hops were grounded
    overlap_checked: dict[str, Any] | None = None  # the check against eval_sets (empty "overlapping")
    protocol: GoldenProtocol = "routerag"  # the tag protocol of the trajectories
    rendered_from: str | None = None  # the stored set they were re-rendered from (rerender_golden_set)
    rendering: dict[str, RenderingStats] = Field(default_factory=dict)  # source -> how its rows rendered
    command: str = ""


def search_modes(trajectory: GoldenTrajectory) -> list[str]:
    """The mode tag of each search of a trajectory, in order (GraphRAG-R1's searches name no mode:
    each is ``query``)."""
    if trajectory.protocol == "graphrag-r1":
        return ["query" for seg in trajectory.segments if seg.kind == "model" for _ in range(seg.text.count(QUERY_OPEN))]
    return [m.group(1) for seg in trajectory.segments if seg.kind == "model" for m in _SEARCH.finditer(seg.text)]


def golden_stats(trajectories: Sequence[GoldenTrajectory], *, sources: Sequence[str], eval_sets: Sequence[str],
                 grounders: dict[str, Grounder], command: str = "", **extra: Any) -> GoldenSetStats:
    hops: dict[str, Counter[int]] = {}
    forms: dict[str, Counter[str]] = {}
    by_hop: dict[int, Counter[str]] = {}
    for t in trajectories:
        modes = search_modes(t)
        hops.setdefault(t.source, Counter())[len(modes)] += 1
        forms.setdefault(t.source, Counter())[question_form(t.question)] += 1
        for i, mode in enumerate(modes, start=1):
            by_hop.setdefault(i, Counter())[mode] += 1
    overlap = None
    if eval_sets:
        questions = [Question(qid=t.qid, question=t.question, answers=t.answers, dataset=t.dataset) for t in trajectories]
        report = check_overlap(questions, eval_sets)
        if report.overlapping:
            raise ValueError(f"golden trajectories overlap the evaluation sets: {report.overlapping[:5]}")
        overlap = report.model_dump()
    return GoldenSetStats(
        sources=list(sources),
        eval_sets=list(eval_sets),
        grounded=bool(grounders),
        trajectories=len(trajectories),
        by_source=dict(Counter(t.source for t in trajectories)),
        hops={src: dict(sorted(c.items())) for src, c in hops.items()},
        modes_by_hop={i: dict(sorted(c.items())) for i, c in sorted(by_hop.items())},
        forms={src: dict(sorted(c.items())) for src, c in forms.items()},
        grounding={name: g.stats for name, g in grounders.items()},
        overlap_checked=overlap,
        command=command,
        **extra,
    )


def build_golden_set(sources: Sequence[str], out_dir: str | Path, *, eval_sets: Sequence[str],
                     ground: Callable[[str], Grounder] | None = None, mode_policy: ModePolicy = "bridge-graph",
                     command: str = "", **render: Any) -> GoldenSetStats:
    """Build the trajectories of ``sources`` (evaluation overlap dropped; grounded in real
    retrieval when ``ground``) and write them with their statistics into ``out_dir``."""
    grounders: dict[str, Grounder] = {}

    def keep(name: str) -> Grounder:
        grounders[name] = ground(name)  # type: ignore[misc]
        return grounders[name]

    trajectories = golden_trajectories(sources, exclude_eval=eval_sets, mode_policy=mode_policy,
                                       ground=keep if ground is not None else None, **render)
    stats = golden_stats(trajectories, sources=sources, eval_sets=eval_sets, grounders=grounders, command=command)
    write_golden_set(trajectories, stats, out_dir)
    return stats


def rerender_golden_set(stored_set: str | Path, out_dir: str | Path, replay_for: Callable[[str], EpisodeReplay], *,
                        protocol: GoldenProtocol = "graphrag-r1", eval_sets: Sequence[str], command: str = "") -> GoldenSetStats:
    """A stored RouteRAG-protocol set rendered in ``protocol`` (same questions, reasoning, queries
    and answers), each trajectory's observations from ``replay_for(its source)``: the protocol's
    episode over that source's own index. Written with its statistics into ``out_dir``, with
    how many of each source rendered and why the others did not (``rendering``)."""
    stored = read_golden_set(stored_set)
    kept: list[GoldenTrajectory] = []
    rendering: dict[str, RenderingStats] = {}
    for name in dict.fromkeys(t.source for t in stored):
        rows = [t for t in stored if t.source == name]
        replay = replay_for(name)
        dropped, searches = Counter(replay.drops), replay.searches
        rendered = [r for t in rows if (r := rerender(t, protocol, replay=replay)) is not None]
        rendering[name] = RenderingStats(stored=len(rows), rendered=len(rendered), searches=replay.searches - searches,
                                         dropped=dict(replay.drops - dropped))
        kept += rendered
    sources = list(rendering)
    stats = golden_stats(kept, sources=sources, eval_sets=eval_sets, grounders={}, command=command, protocol=protocol,
                         rendered_from=str(stored_set), rendering=rendering)
    write_golden_set(kept, stats, out_dir)
    return stats


def write_golden_set(trajectories: Sequence[GoldenTrajectory], stats: GoldenSetStats, out_dir: str | Path) -> None:
    """``golden.jsonl.gz`` (written whole, then moved into place) and ``golden_stats.json`` in ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = gzip.compress("".join(t.model_dump_json() + "\n" for t in trajectories).encode("utf-8"), mtime=0)
    tmp = out / (TRAJECTORIES_FILE + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(out / TRAJECTORIES_FILE)
    atomic_write_text(out / STATS_FILE, json.dumps(json.loads(stats.model_dump_json()), indent=2) + "\n")


def read_golden_set(path: str | Path) -> list[GoldenTrajectory]:
    """The trajectories of a ``golden.jsonl.gz`` file (or of the folder holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / TRAJECTORIES_FILE
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [GoldenTrajectory.model_validate_json(line) for line in handle if line.strip()]
