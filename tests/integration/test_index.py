"""Index bundles over a real 150-passage slice of 2WikiMultihopQA with the bundled embedder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from routerag.corpus.loaders import load_corpus
from routerag.corpus.schema import Document
from routerag.index.bm25 import BM25Index
from routerag.index.bundle import build_index, load_index
from routerag.index.component import COMPONENTS, IndexComponent
from routerag.index.embedder import resolve_dtype
from routerag.index.manifest import IndexLoadError
from routerag.index.settings import IndexSettings
from routerag.sources.base import RetrievalError
from routerag.sources.registry import bundle_sources, mount_bundle

pytestmark = pytest.mark.integration
QUESTION = "Which film was released first, Aas Ka Panchhi or Phoolwari?"


@pytest.fixture(scope="module")
def corpus(shared) -> list[Document]:
    return load_corpus(shared / "2wikimultihopqa" / "2wikimultihopqa_corpus.json").docs


@pytest.fixture(scope="module")
def built(tmp_path_factory, corpus) -> Path:
    directory = tmp_path_factory.mktemp("idx") / "wiki150"
    build_index(corpus[:150], directory)
    return directory


def _copy(built: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(built, target)
    return target


def test_components_registry_and_protocol(built):
    assert {"dense", "bm25", "graph"} <= set(COMPONENTS.names())
    bundle = load_index(built)
    for component in bundle.components.values():
        assert isinstance(component, IndexComponent)


def test_layout_and_known_passage_retrieved(built, corpus):
    assert sorted(p.name for p in built.iterdir()) == ["bm25", "config.resolved.yaml", "dense", "docs.jsonl", "manifest.json"]
    manifest = json.loads((built / "manifest.json").read_text())
    assert manifest["kind"] == "bundle" and manifest["n_docs"] == 150 and manifest["components"] == ["dense", "bm25"]
    sources, unmounted = mount_bundle(load_index(built))
    assert sources.names() == ["passage", "bm25"]
    assert set(unmounted) == {"graph", "hybrid", "triples"}
    for mode in ("passage", "bm25"):
        result = sources.search_one(QUESTION, 5, mode)
        titles = [h.title for h in result.hits]
        assert "Phoolwari" in titles and "Aas Ka Panchhi" in titles, (mode, titles)
        assert [h.rank for h in result.hits] == list(range(1, len(result.hits) + 1))
        assert all(h.source == mode and h.mode == mode for h in result.hits)
        assert result.hits == sorted(result.hits, key=lambda h: -h.score)
        assert result.latency_ms > 0


def test_batched_search_equals_one_by_one(built, corpus):
    source = bundle_sources(load_index(built)).get("passage")
    queries = [QUESTION, "Who was born first out of Aivar Kuusmaa and Andy Summers?", "Japanese science fiction film",
               "Indian Bollywood film of 1946", "Czech comedy"]
    atol = 5e-3 if resolve_dtype("auto") == "bfloat16" else 1e-5
    batched = source.search(queries, 4)
    assert len(batched) == len(queries)
    for query, result in zip(queries, batched):
        (single,) = source.search([query], 4)
        assert [h.doc_id for h in single.hits] == [h.doc_id for h in result.hits]
        # bfloat16 (the default where the CPU has native bf16) rounds differently with padding
        np.testing.assert_allclose([h.score for h in single.hits], [h.score for h in result.hits], atol=atol)


def test_bad_queries_refused(built):
    sources = bundle_sources(load_index(built))
    with pytest.raises(RetrievalError, match="query 0 is empty"):
        sources.get("passage").search(["   "], 3)
    with pytest.raises(RetrievalError, match="limit is 2000"):
        sources.get("bm25").search(["x" * 2001], 3)
    with pytest.raises(RetrievalError, match="unknown source 'graph'; mounted: passage, bm25"):
        sources.search(["x"], 3, ["graph"])
    (result,) = sources.get("bm25").search(["the of and"], 3)  # stopwords only: no term, no hits
    assert result.hits == []


def test_incremental_add_embeds_only_new_docs(built, corpus, tmp_path):
    directory = _copy(built, tmp_path)
    bundle = load_index(directory)
    dense = bundle.component("dense")
    embedder = dense.embedder
    seen: list[int] = []
    original = embedder.encode

    def counting(texts, *, is_query=False):
        if not is_query:
            seen.append(len(texts))
        return original(texts, is_query=is_query)

    embedder.encode = counting  # the bundled model, counted
    try:
        new = corpus[150:155]
        added = bundle.add_documents(corpus[:3] + new)  # the first three are already indexed
        assert [d.doc_id for d in added] == [d.doc_id for d in new]
        assert seen == [5]
        assert bundle.add_documents(new) == [] and seen == [5]
    finally:
        del embedder.encode
    target = new[2]
    for b in (bundle, load_index(directory)):  # in memory and reloaded from disk
        assert len(b.store) == 155
        sources = bundle_sources(b)
        for mode in ("passage", "bm25"):
            hits = sources.search_one(f"{target.title} {target.text[:80]}", 3, mode).hits
            assert hits[0].doc_id == target.doc_id, mode
    assert json.loads((directory / "manifest.json").read_text())["n_docs"] == 155


def test_failed_build_leaves_nothing(tmp_path, corpus, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(BM25Index, "build", classmethod(boom))
    with pytest.raises(RuntimeError, match="disk full"):
        build_index(corpus[:20], tmp_path / "idx", components=["bm25"])
    assert list(tmp_path.iterdir()) == []


def test_build_refuses_existing_unknown_component_and_empty(tmp_path, built, corpus):
    with pytest.raises(FileExistsError, match="already exists"):
        build_index(corpus[:5], built)
    with pytest.raises(IndexLoadError, match="unknown index component 'nope'; valid: bm25, dense, graph"):
        build_index(corpus[:5], tmp_path / "x", components=["nope"])
    with pytest.raises(ValueError, match="no documents"):
        build_index([], tmp_path / "y", components=["bm25"])
    assert list(tmp_path.iterdir()) == []


def test_overwrite_replaces(tmp_path, corpus):
    directory = tmp_path / "idx"
    build_index(corpus[:10], directory, components=["bm25"])
    build_index(corpus[10:30], directory, components=["bm25"], overwrite=True)
    assert len(load_index(directory).store) == 20
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]


def test_settings_mismatch_refused(built):
    other_embedder = IndexSettings.model_validate({"embedder": {"model": "some/other-model"}})
    with pytest.raises(IndexLoadError, match=r"dense: built with embedder .*all-MiniLM.*configured .*some/other-model"):
        load_index(built, other_embedder)
    other_bm25 = IndexSettings.model_validate({"bm25": {"k1": 0.9}})
    with pytest.raises(IndexLoadError, match=r"bm25: built with bm25 settings"):
        load_index(built, other_bm25)
    hnsw = IndexSettings.model_validate({"dense": {"faiss": "hnsw"}})
    with pytest.raises(IndexLoadError, match="a 'flat' FAISS index, configured 'hnsw'"):
        load_index(built, hnsw)
    # query-time settings may differ
    load_index(built, IndexSettings.model_validate({"embedder": {"batch_size": 8}}))


def test_corrupt_files_refused(built, tmp_path):
    directory = _copy(built, tmp_path)
    faiss_file = directory / "dense" / "faiss.index"
    faiss_file.write_bytes(faiss_file.read_bytes()[:1000])
    with pytest.raises(IndexLoadError, match=r"dense/faiss.index: corrupt FAISS index"):  # the reader's own check first
        load_index(directory)
    load_index(directory, components=["bm25"])  # the other component still opens
    data_file = directory / "bm25" / "bm25s" / "data.csc.index.npy"
    np.save(data_file, np.load(data_file)[:10], allow_pickle=False)
    with pytest.raises(IndexLoadError, match=r"bm25/bm25s: corrupt BM25 arrays \(data has 10 entries"):
        load_index(directory, components=["bm25"])
    (directory / "bm25" / "bm25s" / "vocab.index.json").write_text('{"a": ')
    with pytest.raises(IndexLoadError, match=r"bm25/bm25s: corrupt BM25 arrays \(JSONDecodeError"):
        load_index(directory, components=["bm25"])

    lines = (built / "docs.jsonl").read_text().splitlines()
    (directory / "docs.jsonl").write_text("\n".join(lines[:3] + ["{not json"] + lines[4:]) + "\n")
    with pytest.raises(IndexLoadError, match=r"docs.jsonl:4: corrupt document record"):
        load_index(directory)

    (directory / "docs.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # one document lost
    with pytest.raises(IndexLoadError, match="does not match the manifest"):
        load_index(directory)

    (directory / "manifest.json").write_text("{")
    with pytest.raises(IndexLoadError, match="corrupt manifest"):
        load_index(directory)
    with pytest.raises(IndexLoadError, match="no such index directory"):
        load_index(tmp_path / "missing")


def test_a_flipped_byte_in_faiss_index_is_corrupt_under_verify(built, tmp_path, monkeypatch):
    from routerag.index import manifest as manifest_module
    from routerag.index.bundle import verify_index

    files, hashed = verify_index(built)
    assert files >= 6 and hashed > 150 * 384 * 4  # every file, the vectors included
    directory = _copy(built, tmp_path)
    faiss_file = directory / "dense" / "faiss.index"
    data = bytearray(faiss_file.read_bytes())
    data[len(data) // 2] ^= 0x40  # a float of one vector: FAISS reads the file without complaint
    faiss_file.write_bytes(bytes(data))
    with pytest.raises(IndexLoadError, match=r"dense/faiss.index: corrupt \(its content differs .*\); rebuild the index"):
        verify_index(directory)
    with pytest.raises(IndexLoadError, match=r"dense/faiss.index: corrupt"):
        load_index(directory)  # small files are hashed at every load
    # a large vector file is hashed only when asked (verify_index, load_index(verify=True))
    monkeypatch.setattr(manifest_module, "HASH_AT_LOAD_BYTES", 0)
    load_index(directory, components=["dense"])
    with pytest.raises(IndexLoadError, match=r"dense/faiss.index: corrupt"):
        load_index(directory, components=["dense"], verify=True)
    load_index(directory, components=["bm25"])  # the other component is intact


def test_a_truncated_or_unparsable_config_is_an_error_not_defaults(built, tmp_path):
    directory = _copy(built, tmp_path)
    config = directory / "config.resolved.yaml"
    text = config.read_text()
    config.write_text(text.rsplit("\n", 4)[0] + "\n")  # whole lines cut: valid YAML, the last settings defaulted
    with pytest.raises(IndexLoadError, match=r"config.resolved.yaml: corrupt .*rebuild the index"):
        load_index(directory)
    # an index built before hashes were recorded: the file itself must be whole
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest.pop("files")
    (directory / "manifest.json").write_text(json.dumps(manifest))
    for broken in (text[: text.index("bm25:")], "", "dense: [1,\n", "just a string\n"):
        config.write_text(broken)
        with pytest.raises(IndexLoadError, match=r"config.resolved.yaml: corrupt"):
            load_index(directory)


def test_an_index_without_hashes_loads_and_says_so_once(built, tmp_path, caplog):
    directory = _copy(built, tmp_path)
    for path in (directory / "manifest.json", directory / "dense" / "manifest.json", directory / "bm25" / "manifest.json"):
        manifest = json.loads(path.read_text())
        manifest.pop("files")
        path.write_text(json.dumps(manifest))
    with caplog.at_level("WARNING", logger="routerag.index.manifest"):
        load_index(directory)
        load_index(directory)
    said = [r.getMessage() for r in caplog.records if "without content hashes" in r.getMessage()]
    assert len(said) == 1  # once for the index, not per component or per load
    from routerag.index.bundle import verify_index

    assert verify_index(directory) == (0, 0)


def test_component_corpus_mismatch_refused(built, tmp_path):
    directory = _copy(built, tmp_path)
    manifest = json.loads((directory / "bm25" / "manifest.json").read_text())
    manifest["corpus_hash"] = "0" * 32
    (directory / "bm25" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexLoadError, match=r"bm25/manifest.json: built over another corpus"):
        load_index(directory)


def test_hnsw_index(tmp_path, corpus):
    settings = IndexSettings.model_validate({"dense": {"faiss": "hnsw", "hnsw_m": 16}})
    directory = tmp_path / "hnsw"
    build_index(corpus[:60], directory, settings, components=["dense"])
    bundle = load_index(directory)  # the stored settings are used
    assert bundle.settings.dense.faiss == "hnsw"
    titles = [h.title for h in bundle_sources(bundle).search_one(QUESTION, 5, "passage").hits]
    assert "Phoolwari" in titles


def test_add_component_to_existing_bundle(tmp_path, corpus):
    directory = tmp_path / "idx"
    bundle = build_index(corpus[:20], directory, components=["bm25"])
    with pytest.raises(IndexLoadError, match="already has a 'bm25' component"):
        bundle.add_component("bm25")
    bundle.add_component("dense")
    reloaded = load_index(directory)
    assert reloaded.manifest.components == ["bm25", "dense"]
    assert bundle_sources(reloaded).names() == ["passage", "bm25"]
    assert sorted(p.name for p in directory.iterdir() if p.name.startswith(".")) == []


def test_embedder_precision_is_configurable_and_interchangeable():
    import torch

    from routerag.index.embedder import EmbedderConfig, build_embedder

    fp32 = build_embedder(EmbedderConfig(dtype="float32"))
    bf16 = build_embedder(EmbedderConfig(dtype="bfloat16"))
    assert next(fp32.model.parameters()).dtype == torch.float32
    assert next(bf16.model.parameters()).dtype == torch.bfloat16
    assert fp32.identity == bf16.identity  # precision does not change what an index is compatible with
    texts = ["Who directed Aas Ka Panchhi?", "Phoolwari is a 1946 Indian Bollywood film."]
    a, b = fp32.encode(texts), bf16.encode(texts)
    assert a.dtype == b.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    assert np.all(np.sum(a * b, axis=1) > 0.995)
    assert resolve_dtype("float32") == "float32" and resolve_dtype("auto") in {"float32", "bfloat16"}


def test_embedder_device_is_configurable_and_leaves_fingerprints_alone():
    import pydantic
    import torch

    from routerag.config import fingerprint_dump
    from routerag.index.embedder import EmbedderConfig, build_embedder, resolve_device

    assert "device" not in fingerprint_dump(EmbedderConfig())  # cached indexes keep their keys
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cuda:1") == "cuda:1"
    with pytest.raises(pydantic.ValidationError, match="device"):
        EmbedderConfig(device="tpu")
    cpu = build_embedder(EmbedderConfig(dtype="float32", device="cpu"))
    assert cpu.device == "cpu" and next(cpu.model.parameters()).device.type == "cpu"
    auto = build_embedder(EmbedderConfig(dtype="float32"))
    assert auto.identity == cpu.identity  # the device does not change what an index is compatible with
    texts = [f"passage {i}: Phoolwari is a 1946 Indian Bollywood film." for i in range(40)]  # the bulk path
    np.testing.assert_allclose(auto.encode(texts), cpu.encode(texts), atol=1e-4)


def test_direct_query_path_equals_sentence_transformers_encode():
    from routerag.index.embedder import FAST_PATH_MAX, EmbedderConfig, build_embedder

    embedder = build_embedder(EmbedderConfig(dtype="float32"))
    assert embedder._fast is not None  # MiniLM is Transformer -> mean pooling -> normalize
    texts = ["Who directed Aas Ka Panchhi?", "Phoolwari", "a much longer query " * 20]
    direct = embedder.encode(texts, is_query=True)
    reference = embedder.model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(direct, reference, atol=1e-5)
    many = [f"question number {i}" for i in range(FAST_PATH_MAX + 1)]  # the library path
    np.testing.assert_allclose(embedder.encode(many)[:3], embedder.encode(many[:3]), atol=1e-5)


def test_bulk_path_equals_the_query_path_and_keeps_torch_threads():
    """Index builds embed through length-sorted chunks on one single-threaded worker per torch
    thread: same vectors as the query path, duplicates embedded once, torch's thread count kept."""
    import torch

    from routerag.index.embedder import BULK_CHUNK, FAST_PATH_MAX, EmbedderConfig, build_embedder

    embedder = build_embedder(EmbedderConfig(dtype="float32", passage_prefix="passage: "))
    texts = [f"('entity {i}', 'relation', '{'object ' * (i % 7)}')" for i in range(BULK_CHUNK * 2 + 5)]
    texts += texts[:3]  # duplicates
    assert len(texts) > FAST_PATH_MAX
    threads = torch.get_num_threads()
    bulk = embedder.encode(texts)
    assert torch.get_num_threads() == threads
    pieces = np.concatenate([embedder.encode(texts[i : i + 8]) for i in range(0, len(texts), 8)])
    np.testing.assert_allclose(bulk, pieces, atol=1e-5)
    np.testing.assert_array_equal(bulk[-3:], bulk[:3])
    np.testing.assert_allclose(np.linalg.norm(bulk, axis=1), 1.0, atol=1e-5)
    reference = embedder.model.encode(["passage: " + t for t in texts[:40]], normalize_embeddings=True)
    np.testing.assert_allclose(embedder.encode(texts[:40]), reference, atol=1e-5)


def test_cached_index_builds_once_under_concurrent_callers(tmp_path):
    """Parallel evaluation lanes over one dataset: one builds, the others wait and load it."""
    import threading

    from routerag.corpus.schema import Document
    from routerag.index import bundle as bundle_mod

    docs = [Document(doc_id=f"d{i}", title=f"T{i}", text=f"passage number {i} about topic {i % 3}") for i in range(20)]
    target = tmp_path / "idx"
    builds = []
    real_build = bundle_mod.build_index

    def counting_build(*args, **kwargs):
        builds.append(1)
        return real_build(*args, **kwargs)

    bundle_mod.build_index = counting_build
    try:
        results, errors = [], []

        def lane():
            try:
                results.append(bundle_mod.cached_index(docs, target, components=["bm25"]))
            except Exception as exc:  # pragma: no cover - the assertion below reports it
                errors.append(exc)

        threads = [threading.Thread(target=lane) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        bundle_mod.build_index = real_build
    assert not errors
    assert len(builds) == 1
    assert [len(b.store) for b in results] == [20, 20, 20]
