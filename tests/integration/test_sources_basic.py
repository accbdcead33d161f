"""Passage/BM25/table sources, renaming, multi-source sets and bundle mounting, on real data:
RealRoute law-med (first 25 passages of each source), 2Wiki and bundled-style tables."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from routerag.corpus.datasets import data_root
from routerag.corpus.loaders import load_corpus
from routerag.corpus.schema import Document
from routerag.corpus.tables import Table, table_documents
from routerag.index.bundle import build_index
from routerag.index.manifest import IndexLoadError
from routerag.sources.base import QueryResult, RetrievalRequest
from routerag.sources.multi import NamedCorpus, NamedSource, multi_source_set, open_corpus_bundle, realroute_corpora
from routerag.sources.registry import BUNDLE_MODES, SOURCES, bundle_sources, mount_bundle
from routerag.sources.table import TableSource


@pytest.fixture(scope="module")
def law_med(shared) -> list[NamedCorpus]:
    full = realroute_corpora("law-med")
    return [c.model_copy(update={"docs": c.docs[:25]}) for c in full]


def test_registry_names():
    assert {"passage", "bm25", "table", "graph", "hybrid", "triples", "remote"} <= set(SOURCES.names())
    assert SOURCES.get("passage").__name__ == "PassageSource"
    assert set(BUNDLE_MODES) == {"passage", "bm25", "graph", "hybrid", "triples"}


@pytest.mark.data
def test_realroute_corpora_read_profiles():
    corpora = realroute_corpora("law-med")
    assert [c.name for c in corpora] == ["local", "global"]
    assert "legal" in corpora[0].profile and "clinical" in corpora[1].profile
    assert len(corpora[0].docs) == 200 and all(d.source == "local" for d in corpora[0].docs)
    with pytest.raises(ValueError, match="unknown multi-source set 'nope'"):
        realroute_corpora("nope")  # type: ignore[arg-type]


def test_realroute_bad_profiles_file(tmp_path):
    folder = tmp_path / "multisource"
    folder.mkdir()
    (folder / "law-med_corpus_profiles.json").write_text(json.dumps({"local_profile": "x"}))
    with pytest.raises(ValueError, match="field 'global_profile' is missing"):
        realroute_corpora("law-med", folder)


def test_multi_source_routes_by_corpus(tmp_path, law_med):
    sources = multi_source_set(law_med, tmp_path)
    assert sources.names() == ["local", "global"]
    assert sources.profiles()["global"].startswith("This corpus contains clinical")
    law_doc, med_doc = law_med[0].docs[3], law_med[1].docs[5]
    response = sources.search([law_doc.text[:300], med_doc.text[:300]], 3, ["local", "global"])
    local, glob = response.results["local"], response.results["global"]
    assert local[0].hits[0].doc_id == law_doc.doc_id and glob[1].hits[0].doc_id == med_doc.doc_id
    assert all(h.source == "local" and h.mode == "passage" for r in local for h in r.hits)
    assert all(h.source == "global" for r in glob for h in r.hits)
    # a second call reuses the built bundles; changed documents are refused unless rebuild
    multi_source_set(law_med, tmp_path)
    changed = [law_med[0].model_copy(update={"docs": law_med[0].docs[:10]}), law_med[1]]
    with pytest.raises(IndexLoadError, match="built over other documents"):
        multi_source_set(changed, tmp_path)
    assert len(open_corpus_bundle(changed[0], tmp_path, rebuild=True).store) == 10


def test_multi_source_bm25_mode_and_name_checks(tmp_path, law_med):
    sources = multi_source_set(law_med, tmp_path, mode="bm25")
    result = sources.search_one("medication dosage", 2, "global")
    assert result.source == "global" and all(h.mode == "bm25" for h in result.hits)
    with pytest.raises(ValueError, match="corpus names repeat"):
        multi_source_set([law_med[0], law_med[0]], tmp_path)
    with pytest.raises(ValueError, match="source name 'a/b'"):
        NamedCorpus(name="a/b", profile="", docs=[])


class _Echo:
    """A unit-test double: a Source that returns one fixed hit per query."""

    name, mode, profile = "echo", "passage", "echo"

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]:
        from routerag.trace import Hit

        hit = Hit(doc_id="d1", title="t", text="x", score=1.0, source=self.name, mode=self.mode, rank=1)
        return [QueryResult(query=q, source=self.name, hits=[hit], latency_ms=0.1) for q in queries]


def test_named_source_relabels():
    named = NamedSource(_Echo(), "medicine", "clinical questions")
    (result,) = named.search(["q"], 1)
    assert result.source == "medicine" and result.hits[0].source == "medicine" and result.hits[0].mode == "passage"
    assert named.profile == "clinical questions" and NamedSource(_Echo(), "x").profile == "echo"


def test_table_source(tmp_path):
    table = Table.model_validate(
        {
            "title": "Summer Olympic Games",
            "header": ["Year", "City", "Country"],
            "rows": [["1896", "Athens", "Greece"], ["1900", "Paris", "France"], ["1904", "St. Louis", "United States"],
                     ["1908", "London", "United Kingdom"], ["1912", "Stockholm", "Sweden"]],
        }
    )
    docs = table_documents(table)
    bundle = build_index(docs, tmp_path / "tables", components=["dense"])
    source = TableSource.from_bundle(bundle)
    assert (source.name, source.mode) == ("table", "table")
    (result,) = source.search(["Which city hosted the Olympics in 1908?"], 2)
    assert "London" in result.hits[0].text and result.hits[0].mode == "table"


@pytest.mark.data
def test_mount_bundle_reports_missing(tmp_path):
    docs = load_corpus(data_root() / "2wikimultihopqa" / "2wikimultihopqa_corpus.json").docs[:30]
    bundle = build_index(docs, tmp_path / "b", components=["bm25"])
    sources, skipped = mount_bundle(bundle)
    assert sources.names() == ["bm25"]
    assert skipped["passage"] == "the index has no dense component"
    request = RetrievalRequest(queries=[docs[7].title, docs[2].title], k=3, sources=["bm25"])
    results = sources.retrieve(request).results["bm25"]
    assert [r.hits[0].doc_id for r in results] == [docs[7].doc_id, docs[2].doc_id]
    assert all(r.latency_ms > 0 for r in results)


def test_document_metadata_reaches_hits(tmp_path):
    docs = [Document.make("A", "alpha particles are helium nuclei", metadata={"row": 1}),
            Document.make("B", "beta decay emits electrons", metadata={"row": 2})]
    bundle = build_index(docs, tmp_path / "m", components=["bm25"])
    (result,) = bundle_sources(bundle).get("bm25").search(["beta electrons"], 5)
    assert [h.metadata for h in result.hits] == [{"row": 2}]
