"""The Arrow document store (``docstore: arrow``): round trip, fetch by row across batches,
zero-copy memory mapping, adds, clear errors for truncated/corrupt files, and the bundle path
(build, load, add, convert) with the id invariant row i = document i."""

from __future__ import annotations

import json

import pytest

from routerag.sources.registry import bundle_sources

pa = pytest.importorskip("pyarrow")

from routerag.config import fingerprint_dump  # noqa: E402
from routerag.corpus.schema import Document  # noqa: E402
from routerag.index import arrow_docstore  # noqa: E402
from routerag.index.arrow_docstore import ArrowDocStore, write_arrow  # noqa: E402
from routerag.index.docstore import ARROW_NAME, DOCS_NAME, DocStore  # noqa: E402
from routerag.index.manifest import IndexLoadError  # noqa: E402
from routerag.index.settings import IndexSettings  # noqa: E402
from routerag.index.stores import open_docstore  # noqa: E402

pytestmark = pytest.mark.integration
def _docs(n: int, start: int = 0) -> list[Document]:
    return [
        Document.make(
            f"Title {i}" if i % 3 else "",
            f"passage {i} — naïve café ✓ " + "word " * (i % 11),
            source="wiki" if i % 2 else "default",
            metadata={"i": i, "tags": ["a", str(i)]} if i % 4 else {},
        )
        for i in range(start, start + n)
    ]


def _write(tmp_path, docs):
    write_arrow(lambda: iter(docs), tmp_path / ARROW_NAME)
    return ArrowDocStore.open(tmp_path)


def test_round_trip_and_hash(tmp_path):
    docs = _docs(40)
    store = _write(tmp_path, docs)
    assert len(store) == 40 and list(store.docs) == docs
    assert store.ids() == [d.doc_id for d in docs]
    assert store.corpus_hash() == DocStore(docs).corpus_hash()
    assert store.at([5, 0, 5]) == [docs[5], docs[0], docs[5]]
    assert store.docs[-1] == docs[-1] and store.docs[3:6] == docs[3:6]
    assert docs[7].doc_id in store and "nope" not in store
    assert store.row(docs[7].doc_id) == 7 and store.get(docs[9].doc_id) == docs[9]
    assert isinstance(open_docstore(tmp_path), ArrowDocStore)
    with pytest.raises(IndexError, match="row 40 out of range"):
        store.at([40])


def test_fetch_by_row_across_batches(tmp_path, monkeypatch):
    monkeypatch.setattr(arrow_docstore, "BATCH_ROWS", 7)
    docs = _docs(50)
    store = _write(tmp_path, docs)
    assert len(store._batches) == 8  # 7 full batches of 7 and one of 1
    rows = [49, 0, 6, 7, 13, 14, 48, 21]
    assert store.at(rows) == [docs[r] for r in rows]


def test_memory_mapped_zero_copy(tmp_path):
    docs = _docs(20_000)
    write_arrow(lambda: iter(docs), tmp_path / ARROW_NAME)
    size = (tmp_path / ARROW_NAME).stat().st_size
    before = pa.total_allocated_bytes()
    store = ArrowDocStore.open(tmp_path)
    fetched = store.at([19_999, 3, 10_000])
    # the batches are views into the mapping: opening and fetching allocate nothing near the file's size
    assert pa.total_allocated_bytes() - before < size // 100
    assert fetched == [docs[19_999], docs[3], docs[10_000]]


def test_add_then_save_appends(tmp_path, monkeypatch):
    monkeypatch.setattr(arrow_docstore, "BATCH_ROWS", 16)
    docs = _docs(30)
    store = _write(tmp_path, docs)
    new = _docs(5, start=30)
    assert store.add([docs[2], *new, new[0]]) == new  # known ids skipped
    assert len(store) == 35 and store.at([34, 1]) == [new[4], docs[1]]
    store.save(tmp_path)
    reopened = ArrowDocStore.open(tmp_path)
    assert list(reopened.docs) == docs + new
    assert reopened.corpus_hash() == DocStore(docs + new).corpus_hash()
    assert store.row(new[3].doc_id) == 33


def test_truncated_or_corrupt_file_gives_a_clear_error(tmp_path):
    _write(tmp_path, _docs(100))
    path = tmp_path / ARROW_NAME
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"docs.arrow: not a readable routerag Arrow document store .* truncated or corrupt"):
        ArrowDocStore.open(tmp_path)
    path.write_bytes(b"not arrow at all" * 10)
    with pytest.raises(ValueError, match="truncated or corrupt"):
        ArrowDocStore.open(tmp_path)
    # a valid Arrow file that is not a routerag store
    from pyarrow import ipc

    table = pa.table({"x": [1, 2]})
    with ipc.new_file(str(path), table.schema) as writer:
        writer.write_table(table)
    with pytest.raises(ValueError, match="is not routerag's docstore"):
        ArrowDocStore.open(tmp_path)


def test_corrupt_row_is_reported_with_its_number(tmp_path):
    docs = _docs(3)
    schema = arrow_docstore._schema(pa, DocStore(docs).corpus_hash(), 3)
    batch = arrow_docstore._batch(pa, schema, docs)
    columns = batch.columns[:4] + [pa.array(["{}", "{broken", "{}"])]
    arrow_docstore._write(tmp_path / ARROW_NAME, schema, [pa.record_batch(columns, schema=schema)])
    store = ArrowDocStore.open(tmp_path)
    assert store.at([0]) == [docs[0]]
    with pytest.raises(ValueError, match="row 1: "):
        store.at([1])


def test_docstore_setting_stays_out_of_fingerprints_at_default():
    assert "docstore" not in fingerprint_dump(IndexSettings())
    assert fingerprint_dump(IndexSettings(docstore="arrow"))["docstore"] == "arrow"


# ---------------------------------------------------------------- bundles (BM25 only: no embedder)
QUESTION = "Which film was released first, Aas Ka Panchhi or Phoolwari?"


@pytest.fixture(scope="module")
def corpus(shared):
    from routerag.corpus.loaders import load_corpus

    return load_corpus(shared / "2wikimultihopqa" / "2wikimultihopqa_corpus.json").docs[:200]


def _hits(bundle):
    return [(h.doc_id, h.text) for h in bundle_sources(bundle, ["bm25"]).search_one(QUESTION, 5, "bm25").hits]


def test_bundle_built_with_arrow_store_loads_searches_and_adds(tmp_path, corpus):
    from routerag.index.bundle import build_index, load_index

    directory = tmp_path / "wiki"
    built = build_index(corpus[:150], directory, IndexSettings(docstore="arrow"), components=["bm25"])
    assert (directory / ARROW_NAME).is_file() and not (directory / DOCS_NAME).exists()
    bundle = load_index(directory)
    assert isinstance(bundle.store, ArrowDocStore)
    hits = _hits(bundle)
    assert hits == _hits(built) and any("Phoolwari" in text for _, text in hits)
    rows = [bundle.store.row(doc_id) for doc_id, _ in hits]  # the id invariant: BM25 row i = document i
    assert [d.doc_id for d in bundle.store.at(rows)] == [doc_id for doc_id, _ in hits]
    assert [d.doc_id for d in corpus[:150]] == bundle.store.ids()

    assert len(bundle.add_documents(corpus[140:170])) == 20
    assert not (directory / DOCS_NAME).exists()
    reloaded = load_index(directory)
    assert isinstance(reloaded.store, ArrowDocStore) and reloaded.store.ids() == [d.doc_id for d in corpus[:170]]


def test_convert_a_jsonl_bundle_to_arrow_and_back(tmp_path, corpus):
    import yaml

    from routerag.index.bundle import CONFIG_NAME, build_index, convert_docstore, load_index

    directory = tmp_path / "wiki"
    build_index(corpus, directory, components=["bm25"])
    original = (directory / DOCS_NAME).read_bytes()
    before = _hits(load_index(directory))
    assert convert_docstore(directory, "arrow") is True
    assert not (directory / DOCS_NAME).exists()
    assert yaml.safe_load((directory / CONFIG_NAME).read_text())["docstore"] == "arrow"
    bundle = load_index(directory)
    assert isinstance(bundle.store, ArrowDocStore) and _hits(bundle) == before
    assert convert_docstore(directory, "arrow") is False
    assert convert_docstore(directory, "jsonl") is True
    assert (directory / DOCS_NAME).read_bytes() == original and not (directory / ARROW_NAME).exists()


def test_bundle_with_a_truncated_arrow_store_fails_clearly(tmp_path, corpus):
    from routerag.index.bundle import build_index, load_index

    directory = tmp_path / "wiki"
    build_index(corpus[:50], directory, IndexSettings(docstore="arrow"), components=["bm25"])
    path = directory / ARROW_NAME
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(IndexLoadError, match="truncated or corrupt: rebuild the index"):
        load_index(directory)
    (directory / DOCS_NAME).write_text("")
    with pytest.raises(IndexLoadError, match="holds both docs.jsonl and docs.arrow"):
        load_index(directory)


def test_cli_convert_docstore(tmp_path, corpus):
    from typer.testing import CliRunner

    from routerag.cli.app import app
    from routerag.cli.main import _load
    from routerag.index.bundle import build_index

    _load()
    directory = tmp_path / "wiki"
    build_index(corpus[:40], directory, components=["bm25"])
    runner = CliRunner()
    done = runner.invoke(app, ["convert-docstore", str(directory), "--to", "arrow"])
    assert done.exit_code == 0 and "converted the documents" in done.output, done.output
    again = runner.invoke(app, ["convert-docstore", str(directory)])
    assert again.exit_code == 0 and "already stored as arrow" in again.output
    bad = runner.invoke(app, ["convert-docstore", str(directory), "--to", "parquet"])
    assert bad.exit_code == 1 and "unknown docstore 'parquet'" in bad.output
    hit = runner.invoke(app, ["retrieve", str(directory), corpus[7].title, "--mode", "bm25", "-k", "3", "--json"])
    assert hit.exit_code == 0, hit.output
    assert corpus[7].title in [h["title"] for h in json.loads(hit.stdout)["results"]["bm25"][0]["hits"]]
