"""Golden trajectories from the HotpotQA distractor training questions, stored with statistics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from routerag.corpus.datasets import load_dataset
from routerag.train.golden import GOLDEN_SOURCES, golden_trajectories
from routerag.train.golden_set import STATS_FILE, TRAJECTORIES_FILE, build_golden_set, read_golden_set, search_modes


@pytest.mark.data
def test_every_distractor_training_question_gives_a_trajectory(shared: Path) -> None:
    assert "hotpotqa-distractor-train" in GOLDEN_SOURCES
    built = golden_trajectories(["hotpotqa-distractor-train"], exclude_eval=["hotpotqa-distractor"])
    assert len(built) == 600
    data = {q.qid: q for q in load_dataset("hotpotqa-distractor-train").questions}
    first = built[0]
    q = data[first.qid]
    assert first.source == "hotpotqa-distractor-train" and first.answers == q.answers
    # one search per supporting title; the observation of each is that title's gold paragraph
    assert search_modes(first) == ["passage", "graph"]
    observations = [s.text for s in first.segments if s.kind == "observation"]
    assert [title in obs for title, obs in zip(q.metadata["supporting_titles"], observations)] == [True, True]
    assert first.completion.rstrip().endswith(f"<answer> {q.answer} </answer>")


def test_golden_set_files_and_statistics(shared: Path, tmp_path: Path) -> None:
    stats = build_golden_set(["hotpotqa-distractor-train", "musique"], tmp_path, eval_sets=["musique:50", "hotpotqa-distractor"],
                             command="routerag golden --no-ground")
    stored = read_golden_set(tmp_path)
    assert len(stored) == stats.trajectories and stats.by_source["hotpotqa-distractor-train"] == 600
    assert 0 < stats.by_source["musique"] <= 50  # the 50 evaluated MuSiQue questions (and hop-sharing ones) dropped
    assert stats.hops["hotpotqa-distractor-train"] == {2: 600}
    assert set(stats.hops["musique"]) <= {2, 3, 4}
    assert stats.modes_by_hop[1] == {"passage": stats.trajectories}  # the first search reads passages
    assert stats.overlap_checked is not None and stats.overlap_checked["overlapping"] == []
    assert sum(stats.forms["hotpotqa-distractor-train"].values()) == 600 and not stats.grounded
    on_disk = json.loads((tmp_path / STATS_FILE).read_text())
    assert on_disk["trajectories"] == stats.trajectories and on_disk["command"] == "routerag golden --no-ground"
    assert (tmp_path / TRAJECTORIES_FILE).read_bytes()[:2] == b"\x1f\x8b"  # gzip
