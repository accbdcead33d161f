"""The fixed train / held-out split of R1-Router's released Step-GRPO trajectories, by trajectory.

A trajectory is one record of ``r1router/stepgrpo_valid.jsonl``, named ``r1router-<index>`` (its
0-based line; the name golden trajectories and ``Question.metadata['trajectory']`` use). The
held-out trajectories are the :data:`HELDOUT_SIZE` with the smallest SHA-256 of
``"<SPLIT_SEED>:<id>"``; every step of a trajectory lies on its side, so no step of a held-out
trajectory is trained on. The chosen ids are stored in the package (``data/r1router/split.json``)
and :func:`split_ids` reads them from there, never from the data folder.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Literal

SPLIT_SEED = "r1router-split-v1"
HELDOUT_SIZE = 30
Side = Literal["train", "heldout"]


def trajectory_id(index: int) -> str:
    """The name of the trajectory on line ``index`` (0-based) of the released file."""
    return f"r1router-{index}"


def choose_heldout(ids: list[str], size: int = HELDOUT_SIZE, seed: str = SPLIT_SEED) -> list[str]:
    """The ``size`` ids with the smallest seeded hash, in their order in ``ids``."""
    ranked = sorted(ids, key=lambda i: hashlib.sha256(f"{seed}:{i}".encode()).hexdigest())
    chosen = set(ranked[:size])
    return [i for i in ids if i in chosen]


def split_file() -> Path:
    """``data/r1router/split.json`` inside the package."""
    return Path(__file__).resolve().parent.parent / "data" / "r1router" / "split.json"


@lru_cache(maxsize=1)
def _stored() -> dict[str, list[str]]:
    data = json.loads(split_file().read_text(encoding="utf-8"))
    return {"train": list(data["train"]), "heldout": list(data["heldout"])}


def split_ids(side: Side) -> list[str]:
    """The stored trajectory ids of one side of the split."""
    return list(_stored()[side])


def build_split(n_trajectories: int) -> dict[str, object]:
    """The split file's content for ``n_trajectories`` released trajectories."""
    ids = [trajectory_id(i) for i in range(n_trajectories)]
    heldout = choose_heldout(ids)
    return {"seed": SPLIT_SEED, "heldout_size": HELDOUT_SIZE,
            "train": [i for i in ids if i not in set(heldout)], "heldout": heldout}
