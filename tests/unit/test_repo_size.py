"""The checkout stays small: no models, indexes or checkpoints in git, and run traces compressed.
A tracked file over 5 MB fails here (the one exception is the shipped policy adapters, xz-compressed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_FILE_BYTES = 5 * 1024 * 1024
MAX_TREE_BYTES = 40 * 1024 * 1024  # the release limit; the two 0.5B policies ship inside it (21 MiB xz), the
# 1.5B's adapter is kept outside the package (`routerag policies install`); a device call takes 64 MiB
MAX_TREE_BYTES_WITHOUT_ADAPTERS = 30 * 1024 * 1024  # run data and superseded artefacts live outside the tree
# docs/results: reports, tables, summaries, and the per-question logs (compressed: `routerag runs compress`) of the
# runs the README's results and training tables read; superseded runs' logs live in git history (docs/results/README.md)
MAX_RESULTS_BYTES = 14 * 1024 * 1024  # the training table's per-question runs (every stage of every system, three sets) are read from here
ALLOWED_LARGE = {  # the shipped policies
    "src/routerag/data/policies/routerag-sft-qwen2.5-coder-0.5b/adapter.gguf.xz",
    "src/routerag/data/policies/graphrag-r1-sft-qwen2.5-coder-0.5b/adapter.gguf.xz",
}


def _tracked() -> list[Path]:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    result = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, timeout=60)
    if result.returncode != 0:
        pytest.skip("not a git checkout")
    names = [n for n in result.stdout.decode("utf-8", errors="surrogateescape").split("\0") if n]
    return [Path(n) for n in names if (ROOT / n).is_file()]  # a file deleted in the work tree is not shipped


def test_no_tracked_file_over_5_mb_but_the_shipped_policy() -> None:
    large = {
        str(p): (ROOT / p).stat().st_size
        for p in _tracked()
        if (ROOT / p).stat().st_size > MAX_FILE_BYTES and p.as_posix() not in ALLOWED_LARGE
    }
    assert large == {}, (
        f"tracked files over {MAX_FILE_BYTES // 2**20} MB: {large}. Keep models, indexes, checkpoints and adapters out "
        "of git (.gitignore); compress finished runs with `routerag runs compress DIR`."
    )


def test_stored_results_stay_small() -> None:
    total = sum((ROOT / p).stat().st_size for p in _tracked() if p.parts[:2] == ("docs", "results"))
    assert total < MAX_RESULTS_BYTES, (
        f"docs/results holds {total / 2**20:.1f} MB of tracked files (limit {MAX_RESULTS_BYTES // 2**20} MB); "
        "compress the finished runs (routerag runs compress docs/results) and keep only the per-question logs the "
        "README's tables read (docs/results/readme-table.yaml, docs/results/training-table.yaml)"
    )


def test_tracked_tree_leaves_room_in_a_device_call() -> None:
    total = sum((ROOT / p).stat().st_size for p in _tracked())
    assert total < MAX_TREE_BYTES, (
        f"the tracked tree is {total / 2**20:.1f} MB (limit {MAX_TREE_BYTES // 2**20} MB): a GPU machine takes at most 64 MiB "
        "of checkout per call, carried files included (scripts/gpu/gpu_slim_tree.sh cuts it for a call); keep models, "
        "adapters beyond the shipped policies and runs out of git"
    )


def test_tracked_tree_without_the_shipped_adapters_stays_small() -> None:
    total = sum((ROOT / p).stat().st_size for p in _tracked() if p.as_posix() not in ALLOWED_LARGE)
    assert total < MAX_TREE_BYTES_WITHOUT_ADAPTERS, (
        f"the tracked tree without the shipped adapters is {total / 2**20:.1f} MB (limit "
        f"{MAX_TREE_BYTES_WITHOUT_ADAPTERS // 2**20} MB): keep run data and superseded artefacts out of git")
