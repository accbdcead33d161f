"""The fixed train / held-out split of R1-Router's released trajectories, by trajectory."""

from __future__ import annotations

import json

import pytest

from routerag.corpus.r1router_split import HELDOUT_SIZE, build_split, choose_heldout, split_file, split_ids


def test_stored_split_is_the_seeded_hash_choice() -> None:
    stored = json.loads(split_file().read_text(encoding="utf-8"))
    assert stored == build_split(119)  # the file is reproducible from the seed
    train, heldout = split_ids("train"), split_ids("heldout")
    assert (len(train), len(heldout)) == (89, HELDOUT_SIZE)
    assert not set(train) & set(heldout) and len(set(train) | set(heldout)) == 119


def test_choice_depends_on_the_ids_only() -> None:
    ids = [f"t-{i}" for i in range(50)]
    chosen = choose_heldout(ids, 10, "s")
    assert len(chosen) == 10 and chosen == choose_heldout(list(reversed(ids)), 10, "s")[::-1]
    assert len(set(choose_heldout(ids + ["t-extra"], 10, "s")) - set(chosen)) <= 1  # one new id moves at most one
    assert choose_heldout(ids, 10, "other seed") != chosen


@pytest.mark.data
def test_split_datasets_keep_whole_trajectories() -> None:
    from routerag.corpus.datasets import load_dataset

    full, train, heldout = (load_dataset(n) for n in ("r1router-steps", "r1router-steps-train", "r1router-steps-heldout"))
    side_of = {**{q.qid: "train" for q in train.questions}, **{q.qid: "heldout" for q in heldout.questions}}
    assert sorted(side_of) == sorted(q.qid for q in full.questions)  # every step on exactly one side
    by_trajectory: dict[int, set[str]] = {}
    for q in full.questions:
        by_trajectory.setdefault(q.metadata["trajectory"], set()).add(side_of[q.qid])
    assert all(len(sides) == 1 for sides in by_trajectory.values())
    assert len({q.metadata["trajectory"] for q in heldout.questions}) == 30
    assert (len(train.questions), len(heldout.questions)) == (259, 87)  # ret steps of 89 / 30 trajectories
