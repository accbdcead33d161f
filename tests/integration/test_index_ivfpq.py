"""The ``ivfpq`` dense index: IVF-PQ memory-mapped read-only, exact re-scoring from fp16 vectors.

Recall, re-scoring, memory mapping and settings errors on a few thousand synthetic clustered
vectors (fast); the bundle path (build, load, add, manifest) over real 2Wiki passages with the
bundled embedder."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pydantic import ValidationError

from routerag.index.ivfpq import (
    FAISS_NAME,
    VECTORS_NAME,
    IVFPQIndex,
    add_in_batches,
    factory_string,
    merge_parts,
    open_vectors,
)
from routerag.index.manifest import IndexLoadError
from routerag.index.settings import IndexSettings, IVFPQSettings
from routerag.sources.registry import bundle_sources

pytestmark = pytest.mark.integration
faiss = pytest.importorskip("faiss")

DIM = 64
N = 4000


def _clustered(n: int, dim: int, seed: int) -> np.ndarray:
    """Normalised vectors around 40 random centres (embeddings are clustered, not uniform)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(40, dim))
    points = centres[rng.integers(0, 40, size=n)] + 0.6 * rng.normal(size=(n, dim))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    vectors = _clustered(N, DIM, seed=1)
    queries = _clustered(100, DIM, seed=2)
    truth = np.argsort(-(queries @ vectors.T), axis=1, kind="stable")[:, :10]  # exact (flat) top 10
    return vectors, queries, truth


SETTINGS = IVFPQSettings(nlist=32, m=16, nbits=6, nprobe=16, rescore=100, train_size=2000, add_batch=700)


@pytest.fixture(scope="module")
def built(tmp_path_factory, data):
    vectors = data[0]
    directory = tmp_path_factory.mktemp("ivfpq")
    shards = (vectors[at : at + 700] for at in range(0, N, 700))  # shard by shard, like the dense build
    IVFPQIndex.build(shards, N, DIM, directory, SETTINGS)
    return directory


def _recall(rows: np.ndarray, truth: np.ndarray) -> float:
    k = truth.shape[1]
    return float(np.mean([len(set(r[:k].tolist()) & set(t.tolist())) / k for r, t in zip(rows, truth)]))


def test_recall_vs_flat_and_rescoring_helps(built, data):
    _, queries, truth = data
    exact = IVFPQIndex.load(built, SETTINGS)
    pq_only = IVFPQIndex.load(built, SETTINGS.model_copy(update={"rescore": 0}))
    _, rows = exact.search(queries, 10)
    _, pq_rows = pq_only.search(queries, 10)
    recall, pq_recall = _recall(rows, truth), _recall(pq_rows, truth)
    assert recall >= 0.95
    assert recall > pq_recall + 0.02  # 6-bit PQ codes alone lose neighbours that re-scoring recovers


def test_rescored_scores_are_exact_inner_products(built, data):
    vectors, queries, _ = data
    index = IVFPQIndex.load(built, SETTINGS)
    scores, rows = index.search(queries[:5], 10)
    for q, s, r in zip(queries[:5], scores, rows):
        assert np.all(np.diff(s) <= 1e-6)  # best first
        np.testing.assert_allclose(s, vectors[r] @ q, atol=2e-3)  # fp16 storage


def test_loaded_memory_mapped_read_only(built, data):
    index = IVFPQIndex.load(built, SETTINGS)
    assert isinstance(index.vectors16, np.memmap) and not index.vectors16.flags.writeable
    invlists = faiss.downcast_InvertedLists(faiss.extract_index_ivf(index.index).invlists)
    assert type(invlists).__name__ == "OnDiskInvertedLists"  # codes and ids stay in the file
    in_ram = IVFPQIndex.load(built, SETTINGS, mmap=False)
    assert type(faiss.downcast_InvertedLists(faiss.extract_index_ivf(in_ram.index).invlists)).__name__ == "ArrayInvertedLists"
    queries = data[1][:20]
    np.testing.assert_array_equal(index.search(queries, 10)[1], in_ram.search(queries, 10)[1])


def test_id_invariant_row_equals_vector(built, data):
    vectors = data[0]
    stored = open_vectors(built / VECTORS_NAME)
    np.testing.assert_array_equal(stored, vectors.astype(np.float16))  # row i = vector i, in shard order
    index = IVFPQIndex.load(built, SETTINGS)
    probe = np.array([0, 1, 699, 700, 1401, N - 1])  # first/last rows of shards
    scores, rows = index.search(vectors[probe], 1)
    np.testing.assert_array_equal(rows[:, 0], probe)
    np.testing.assert_allclose(scores[:, 0], 1.0, atol=2e-3)


def test_add_appends_at_the_tail(tmp_path, data):
    vectors = data[0]
    directory = tmp_path / "grow"
    index = IVFPQIndex.build([vectors[:3000]], 3000, DIM, directory, SETTINGS)
    index.add(vectors[3000:], directory)
    assert index.ntotal == N and len(index.vectors16) == N
    reloaded = IVFPQIndex.load(directory, SETTINGS)
    probe = np.array([5, 2999, 3000, N - 1])
    np.testing.assert_array_equal(reloaded.search(vectors[probe], 1)[1][:, 0], probe)


def test_k_beyond_candidates_is_padded(built, data):
    index = IVFPQIndex.load(built, SETTINGS.model_copy(update={"nprobe": 1, "rescore": 0}))
    scores, rows = index.search(data[1][:3], N)  # one list cannot hold every vector
    assert rows.shape == (3, N) and (rows == -1).any()
    rescored = IVFPQIndex.load(built, SETTINGS.model_copy(update={"nprobe": 1}))
    scores, rows = rescored.search(data[1][:3], N)
    assert np.all(scores[rows == -1] < -1e30) and np.all(scores[rows >= 0] > -1.01)


# ---------------------------------------------------------------- settings errors
def test_bad_settings_give_clear_errors():
    with pytest.raises(ValidationError, match="nprobe=64 exceeds ivfpq.nlist=32"):
        IVFPQSettings(nlist=32, nprobe=64)
    with pytest.raises(ValidationError, match="nlist=5000 exceeds ivfpq.train_size=1000"):
        IVFPQSettings(nlist=5000, nprobe=8, train_size=1000)
    with pytest.raises(ValueError, match=r"ivfpq.m=10 does not divide the dimension 64; pick one of \[1, 2, 4, 8, 16, 32, 64\]"):
        IVFPQSettings(m=10).check_for(64, 10_000)
    with pytest.raises(ValueError, match=r"nlist=1024 exceeds the training sample \(300 vectors.*dense.faiss=flat"):
        IVFPQSettings().check_for(384, 300)
    with pytest.raises(ValueError, match="nbits=8 means 256 centroids per sub-quantizer, more than the 100"):
        IVFPQSettings(nlist=10, nprobe=5).check_for(384, 100)
    assert factory_string(384, IVFPQSettings(opq=True)) == "OPQ48,IVF1024,PQ48x8"


def test_build_refuses_bad_settings_before_writing(tmp_path, data):
    with pytest.raises(ValueError, match="does not divide"):
        IVFPQIndex.build([data[0]], N, DIM, tmp_path / "bad", IVFPQSettings(nlist=32, nprobe=8, m=48))
    assert not (tmp_path / "bad" / VECTORS_NAME).exists()


@pytest.mark.slow  # trains OPQ: minutes on 2 cores; CI runs it (`pytest -m slow` in .ci/run)
def test_opq_variant(tmp_path, data):
    vectors, queries, truth = data
    settings = SETTINGS.model_copy(update={"opq": True})
    index = IVFPQIndex.build([vectors], N, DIM, tmp_path / "opq", settings)
    assert _recall(index.search(queries, 10)[1], truth) >= 0.95
    assert faiss.read_index(str(tmp_path / "opq" / FAISS_NAME)).__class__.__name__ == "IndexPreTransform"


@pytest.mark.parametrize("opq", [False, pytest.param(True, marks=pytest.mark.slow)])  # OPQ: minutes; CI runs it
def test_an_add_step_in_parts_merged_in_row_order_gives_the_same_index(tmp_path, data, built, opq):
    """The add step as the Ray engine runs it (each part of add_batch rows added to its own copy
    of the trained index, merged with ids offset by the part's first row) writes the same index,
    byte for byte, as adding in one process; parts out of order or with a gap are refused."""
    vectors = data[0]
    settings = SETTINGS.model_copy(update={"opq": opq})
    seen: list[int] = []

    def in_parts(index, vectors_path, batch):
        rows = open_vectors(vectors_path)
        trained = faiss.serialize_index(index)

        def parts():
            for start in range(0, len(rows), batch):
                part = faiss.deserialize_index(trained)
                add_in_batches(part, rows, batch, start, min(start + batch, len(rows)))
                seen.append(part.ntotal)
                yield start, part

        merge_parts(index, parts())

    here = tmp_path / "here"
    reference = built if not opq else here
    if opq:
        IVFPQIndex.build([vectors], N, DIM, here, settings)
    merged = IVFPQIndex.build([vectors], N, DIM, tmp_path / "parts", settings, adder=in_parts)
    assert seen == [700] * 5 + [500]
    assert (tmp_path / "parts" / FAISS_NAME).read_bytes() == (reference / FAISS_NAME).read_bytes()
    assert merged.ntotal == N

    trained = faiss.serialize_index(faiss.read_index(str(reference / FAISS_NAME)))

    def part(start, stop):
        index = faiss.deserialize_index(trained)
        index.reset()
        add_in_batches(index, vectors, 700, start, stop)
        return index

    target = faiss.deserialize_index(trained)
    target.reset()
    with pytest.raises(ValueError, match="starting at row 700 follows 0 rows"):
        merge_parts(target, [(700, part(700, 1400)), (0, part(0, 700))])

    def dropping(index, vectors_path, batch):  # an add step that loses rows is caught before anything is written
        add_in_batches(index, open_vectors(vectors_path), batch, 0, N - 1)

    with pytest.raises(RuntimeError, match=f"left {N - 1} vectors in the index, expected {N}"):
        IVFPQIndex.build([vectors], N, DIM, tmp_path / "short", settings, adder=dropping)
    assert not (tmp_path / "short" / FAISS_NAME).exists()


# ---------------------------------------------------------------- the bundle path (real embedder)
QUESTION = "Which film was released first, Aas Ka Panchhi or Phoolwari?"
BUNDLE = {"dense": {"faiss": "ivfpq", "ivfpq": {"nlist": 8, "m": 48, "nbits": 4, "nprobe": 4, "rescore": 50, "add_batch": 64}}}


@pytest.fixture(scope="module")
def corpus(shared):
    from routerag.corpus.loaders import load_corpus

    return load_corpus(shared / "2wikimultihopqa" / "2wikimultihopqa_corpus.json").docs


@pytest.fixture(scope="module")
def wiki_ivfpq(tmp_path_factory, corpus):
    from routerag.index.bundle import build_index

    directory = tmp_path_factory.mktemp("bundle") / "wiki"
    build_index(corpus[:150], directory, IndexSettings.model_validate(BUNDLE), components=["dense"])
    return directory


def test_bundle_build_load_add(tmp_path, corpus, wiki_ivfpq):
    import shutil

    from routerag.index.bundle import load_index

    settings = IndexSettings.model_validate(BUNDLE)
    directory = tmp_path / "wiki"
    shutil.copytree(wiki_ivfpq, directory)
    assert sorted(p.name for p in (directory / "dense").iterdir()) == [FAISS_NAME, "manifest.json", VECTORS_NAME]
    params = json.loads((directory / "dense" / "manifest.json").read_text())["params"]
    assert params["faiss"] == "ivfpq" and params["dim"] == 384 and params["train_sample"] == 150
    assert params["ivfpq"] == settings.dense.ivfpq.model_dump()
    assert params["vectors_dtype"] == "float16"

    bundle = load_index(directory)  # stored settings: memory-mapped
    dense = bundle.component("dense")
    assert isinstance(dense.faiss_index, IVFPQIndex)
    titles = [h.title for h in bundle_sources(bundle).search_one(QUESTION, 5, "passage").hits]
    assert "Phoolwari" in titles
    # the id invariant through the embedder: each passage's own vector finds its row
    vectors = dense.vectors()
    _, rows = dense.search(vectors[[0, 63, 64, 149]], 1)
    assert rows[:, 0].tolist() == [0, 63, 64, 149]

    added = bundle.add_documents(corpus[150:180])
    assert len(added) == 30
    reloaded = load_index(directory)
    dense = reloaded.component("dense")
    assert dense.faiss_index.ntotal == 180 and dense.manifest.n_docs == 180
    new_vectors = dense.embed_documents(corpus[170:172])
    assert dense.search(new_vectors, 1)[1][:, 0].tolist() == [170, 171]


def test_bundle_load_checks_settings(tmp_path, wiki_ivfpq):
    import shutil

    from routerag.index.bundle import load_index

    directory = tmp_path / "wiki"
    shutil.copytree(wiki_ivfpq, directory)
    search_knobs = IndexSettings.model_validate(
        {"dense": {**BUNDLE["dense"], "ivfpq": {**BUNDLE["dense"]["ivfpq"], "nprobe": 8, "rescore": 0}}}
    )
    assert load_index(directory, search_knobs).component("dense").faiss_index.settings.rescore == 0
    other_nlist = IndexSettings.model_validate(
        {"dense": {**BUNDLE["dense"], "ivfpq": {**BUNDLE["dense"]["ivfpq"], "nlist": 16}}}
    )
    with pytest.raises(IndexLoadError, match=r"trained with ivfpq.nlist=8, configured 16; rebuild"):
        load_index(directory, other_nlist)
    with pytest.raises(IndexLoadError, match="a 'ivfpq' FAISS index, configured 'flat'"):
        load_index(directory, IndexSettings())
    (directory / "dense" / VECTORS_NAME).unlink()
    with pytest.raises(IndexLoadError, match=r"vectors.f16.npy: missing; the dense index is incomplete"):
        load_index(directory)


def test_bundle_build_refuses_nlist_beyond_corpus(tmp_path, corpus):
    from routerag.index.bundle import build_index

    settings = IndexSettings.model_validate({"dense": {"faiss": "ivfpq", "ivfpq": {"nlist": 64, "nprobe": 8, "nbits": 4}}})
    with pytest.raises(IndexLoadError, match=r"nlist=64 exceeds the training sample \(40 vectors"):
        build_index(corpus[:40], tmp_path / "small", settings, components=["dense"])
    assert not (tmp_path / "small").exists()


@pytest.mark.data
def test_cli_builds_ivfpq_and_reports_bad_settings(tmp_path):
    from typer.testing import CliRunner

    from routerag.cli.app import app
    from routerag.cli.main import _load
    from routerag.corpus.datasets import data_root

    _load()
    runner = CliRunner()
    records = json.loads((data_root() / "2wikimultihopqa" / "2wikimultihopqa_corpus.json").read_text())
    corpus_file = tmp_path / "c.json"
    corpus_file.write_text(json.dumps(records[:60]))
    base = ["index", str(corpus_file), "-c", "dense", "--set", "dense.faiss=ivfpq"]
    bad = runner.invoke(app, [*base, "--out", str(tmp_path / "bad"), "--set", "dense.ivfpq.nbits=4"])
    assert bad.exit_code == 1 and "nlist=1024 exceeds the training sample (60 vectors" in bad.output
    good = runner.invoke(app, [*base, "--out", str(tmp_path / "ok"), "--set", "dense.ivfpq.nlist=4",
                               "--set", "dense.ivfpq.nprobe=2", "--set", "dense.ivfpq.nbits=4"])
    assert good.exit_code == 0, good.output
    hit = runner.invoke(app, ["retrieve", str(tmp_path / "ok"), records[7]["title"], "-k", "3", "--json"])
    assert hit.exit_code == 0, hit.output
    assert records[7]["title"] in [h["title"] for h in json.loads(hit.stdout)["results"]["passage"][0]["hits"]]


def test_flat_unchanged_and_configs_without_ivfpq_block_load(tmp_path, corpus):
    """A flat index's manifest has no ivfpq block (as before), and a config.resolved.yaml written
    before ivfpq existed (no dense.ivfpq) still loads."""
    import yaml

    from routerag.index.bundle import CONFIG_NAME, build_index, load_index

    directory = tmp_path / "flat"
    build_index(corpus[:30], directory, components=["dense"])
    params = json.loads((directory / "dense" / "manifest.json").read_text())["params"]
    assert params["faiss"] == "flat" and "ivfpq" not in params
    config = yaml.safe_load((directory / CONFIG_NAME).read_text())
    config["dense"].pop("ivfpq")
    (directory / CONFIG_NAME).write_text(yaml.safe_dump(config))
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest.pop("files")  # as an index built before content hashes were recorded
    (directory / "manifest.json").write_text(json.dumps(manifest))
    dense = load_index(directory).component("dense")
    assert type(dense.faiss_index).__name__ == "IndexFlatIP"
    assert dense.search(dense.vectors()[[3]], 1)[1][0, 0] == 3


def test_the_fp16_vectors_are_mapped_with_random_access_advice(tmp_path):
    """Re-scoring reads scattered rows: open_vectors advises the kernel not to read ahead (the
    mapping carries the ``rr`` flag in /proc/self/smaps)."""
    import mmap
    import sys
    from pathlib import Path

    from routerag.index import ivfpq

    path = tmp_path / "v.npy"
    np.save(path, np.arange(24, dtype=np.float16).reshape(6, 4))
    vectors = ivfpq.open_vectors(path)
    assert vectors[2].tolist() == [8.0, 9.0, 10.0, 11.0]
    if not sys.platform.startswith("linux") or not hasattr(mmap, "MADV_RANDOM"):
        pytest.skip("smaps and MADV_RANDOM are Linux's")
    flags, inside = None, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if not line[:1].isupper() or ":" not in line.split()[0]:  # a mapping's header line
            inside = line.rstrip().endswith(str(path.resolve()))
        elif inside and line.startswith("VmFlags:"):
            flags = line.split()[1:]
    assert flags is not None and "rr" in flags
