"""``routerag index --engine ray``: a Ray Data pipeline writing the same bundle as the in-process
build, with bit-identical vectors and IVF-PQ index (the add step on actors, its parts merged; real
MiniLM embedder, real 2Wiki passages, Ray in local mode)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.ray

# ivfpq embeds add_batch=64 rows per call: 150 passages -> 3 shards on 2 actors
IVFPQ = {"dense": {"faiss": "ivfpq", "ivfpq": {"nlist": 8, "m": 48, "nbits": 4, "nprobe": 4, "rescore": 50, "add_batch": 64}}}


@pytest.fixture(scope="module")
def passages(shared):
    from routerag.corpus.loaders import load_corpus

    return load_corpus(shared / "2wikimultihopqa" / "2wikimultihopqa_corpus.json").docs[:150]


def _manifest(path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_ray_build_equals_local_build(tmp_path, passages, ray_local):
    from routerag.index.bundle import build_index, load_index
    from routerag.index.settings import IndexSettings

    settings = IndexSettings.model_validate(IVFPQ)
    local = build_index(passages, tmp_path / "local", settings, components=["dense"])
    on_ray = build_index(passages, tmp_path / "ray", settings, components=["dense"], engine="ray")

    # the same files (no shard folder left behind), the same documents, the same manifests
    files = sorted(p.relative_to(tmp_path / "local").as_posix() for p in (tmp_path / "local").rglob("*"))
    assert files == sorted(p.relative_to(tmp_path / "ray").as_posix() for p in (tmp_path / "ray").rglob("*"))
    for name in ("docs.jsonl", "config.resolved.yaml"):
        assert (tmp_path / "local" / name).read_bytes() == (tmp_path / "ray" / name).read_bytes()
    for name in ("manifest.json", "dense/manifest.json"):
        a, b = _manifest(tmp_path / "local" / name), _manifest(tmp_path / "ray" / name)
        a.pop("created_at"), b.pop("created_at")
        assert a == b
    # bit-identical vectors, and the reloaded ray bundle searches like the local one
    reloaded = load_index(tmp_path / "ray")
    assert np.array_equal(local.component("dense").vectors(), on_ray.component("dense").vectors())
    assert np.array_equal(local.component("dense").vectors(), reloaded.component("dense").vectors())
    assert (tmp_path / "local/dense/vectors.f16.npy").read_bytes() == (tmp_path / "ray/dense/vectors.f16.npy").read_bytes()
    # the add step ran on the actors (3 parts of add_batch rows) and was merged: the same index, byte for byte
    assert (tmp_path / "local/dense/faiss.index").read_bytes() == (tmp_path / "ray/dense/faiss.index").read_bytes()
    query = local.component("dense").embed_queries(["Which film was released first, Aas Ka Panchhi or Phoolwari?"])
    assert np.array_equal(local.component("dense").search(query, 5)[1], reloaded.component("dense").search(query, 5)[1])


def test_plan_tasks_cuts_the_file_at_row_boundaries(tmp_path, passages):
    from routerag.index.docstore import DocStore
    from routerag.index.ray_build import plan_tasks, read_passages

    DocStore(passages[:10]).save(tmp_path)
    tasks = plan_tasks(tmp_path / "docs.jsonl", [(0, 4), (4, 8), (8, 10)])
    assert [read_passages(tmp_path / "docs.jsonl", t) for t in tasks] == [
        [d.passage for d in passages[a:b]] for a, b in [(0, 4), (4, 8), (8, 10)]
    ]
    with pytest.raises(ValueError, match="10 documents, the shard plan needs 12"):
        plan_tasks(tmp_path / "docs.jsonl", [(0, 12)])
