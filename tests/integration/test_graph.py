"""The graph index and its sources on a small real graph: MuSiQue paragraphs with the
precomputed (gpt-3.5-turbo) OpenIE released with HippoRAG, embedded with the bundled MiniLM."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from routerag.corpus.datasets import data_root
from routerag.corpus.loaders import load_questions
from routerag.corpus.schema import Document
from routerag.index.docstore import DocStore
from routerag.index.graph import GRAPH_NPZ, GraphIndex
from routerag.index.manifest import IndexLoadError
from routerag.index.openie.base import OpenIERecord
from routerag.index.settings import GraphSettings, IndexSettings
from routerag.llm.scripted import ScriptedModel
from routerag.sources.fusion import rrf
from routerag.sources.graph import GraphPassageSource, GraphSource
from routerag.sources.hybrid import HybridSource
from routerag.sources.registry import bundle_sources
from routerag.sources.triples import TriplesSource

pytestmark = pytest.mark.integration
MUSIQUE = "musique_train100"
OPENIE = f"{MUSIQUE}/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json"
QUESTIONS = (0, 3)  # 2-hop questions; their paragraphs (supporting + distractors) form the corpus
DISTRACTORS = 6


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROUTERAG_HOME", str(tmp_path_factory.mktemp("home")))
        yield


@pytest.fixture(scope="module")
def musique(home, tmp_path_factory, shared):
    raw = json.loads((shared / MUSIQUE / "musique_train.json").read_text())
    questions = load_questions(shared / MUSIQUE / "musique_train.json")
    docs: list[Document] = []
    for qi in QUESTIONS:
        paragraphs = raw[qi]["paragraphs"]
        chosen = [p for p in paragraphs if p["is_supporting"]] + [p for p in paragraphs if not p["is_supporting"]][:DISTRACTORS]
        docs += [Document.make(p["title"], p["paragraph_text"]) for p in chosen]
    store = DocStore(docs)
    settings = IndexSettings(graph=GraphSettings(extractor="precomputed", openie_file=OPENIE))
    directory = tmp_path_factory.mktemp("idx") / "graph"
    graph = GraphIndex.build(store, directory, settings)
    return graph, directory, [questions[qi] for qi in QUESTIONS]


def test_graph_retrieval_finds_the_supporting_paragraphs(musique):
    graph, _, questions = musique
    assert graph.stats()["extraction_errors"] == 0
    results = GraphSource(graph).search([q.question for q in questions], k=4)
    for question, result in zip(questions, results):
        found = [h.doc_id for h in result.hits]
        assert set(question.supporting_doc_ids) <= set(found), question.question
        assert result.metadata["fallback"] is None
        assert [h.rank for h in result.hits] == [1, 2, 3, 4]
        assert all(a.score >= b.score for a, b in zip(result.hits, result.hits[1:]))
        # what the UI draws
        assert result.metadata["seeds"] and all(s["weight"] > 0 for s in result.metadata["seeds"])
        assert len(result.metadata["facts"]) == graph.settings.graph.fact_topk
        kinds = {n["kind"] for n in result.metadata["top_nodes"]}
        assert kinds <= {"entity", "passage"} and "passage" in kinds


def test_igraph_and_batched_power_ppr_rank_alike(musique):
    graph, _, questions = musique
    queries = [q.question for q in questions]
    vectors = graph.embed_queries(queries)
    power = GraphSource(graph, ppr="power").rank(queries, 5, vectors)
    reference = GraphSource(graph, ppr="igraph").rank(queries, 5, vectors)
    for (a, _), (b, _) in zip(power, reference):
        assert [h.doc_id for h in a] == [h.doc_id for h in b]
        np.testing.assert_allclose([h.score for h in a], [h.score for h in b], atol=1e-6)


def test_single_and_batched_queries_rank_alike(musique):
    """One query runs 1-d float32 PPR, several run as one batch: same lists, same metadata."""
    graph, _, questions = musique
    queries = [q.question for q in questions]
    vectors = graph.embed_queries(queries)
    source = GraphSource(graph)
    batched = source.rank(queries, 5, vectors)
    for i, query in enumerate(queries):
        (hits, meta), (ref_hits, ref_meta) = source.rank([query], 5, vectors[i : i + 1])[0], batched[i]
        assert [h.doc_id for h in hits] == [h.doc_id for h in ref_hits]
        np.testing.assert_allclose([h.score for h in hits], [h.score for h in ref_hits], atol=2e-6)
        # a one-row product and a batch product may differ in the last float32 bit
        assert [f["triple"] for f in meta["facts"]] == [f["triple"] for f in ref_meta["facts"]]
        np.testing.assert_allclose([f["weight"] for f in meta["facts"]], [f["weight"] for f in ref_meta["facts"]], atol=1e-6)
        assert [s["node"] for s in meta["seeds"]] == [s["node"] for s in ref_meta["seeds"]]


def test_seed_weights_follow_the_hipporag_formula(musique):
    """Seed weight = fact weight / passages of the entity, averaged over the facts naming it:
    the compact computation equals the loop over a full entity vector it replaced."""
    graph, _, questions = musique
    source = GraphSource(graph, fact_topk=12)
    scores = graph.data.fact_vecs @ graph.embed_queries([questions[0].question])[0]
    facts = np.argsort(-scores)[:12]
    weights = (scores[facts] - scores.min()) / (scores.max() - scores.min())
    total, count = np.zeros(graph.n_entities), np.zeros(graph.n_entities)
    for f, w in zip(facts, weights):
        for ent in graph.fact_entities[f]:
            total[ent] += w / max(graph.entity_doc_count[ent], 1.0)
            count[ent] += 1
    expected = np.divide(total, count, out=np.zeros_like(total), where=count > 0)
    entities, got = source._entity_weights(facts, weights.astype(np.float64))
    assert list(entities) == list(np.flatnonzero(count))
    np.testing.assert_array_equal(got, expected[entities])
    assert source._entity_weights(np.zeros(0, np.int64), np.zeros(0))[0].size == 0


def test_load_round_trip_and_manifest_checks(musique, tmp_path):
    graph, directory, questions = musique
    loaded = GraphIndex.load(directory, graph.store, graph.settings)
    assert loaded.stats() == graph.stats()
    q = [questions[0].question]
    assert [h.doc_id for h in GraphSource(loaded).search(q, 5)[0].hits] == [h.doc_id for h in GraphSource(graph).search(q, 5)[0].hits]
    with pytest.raises(IndexLoadError, match="another corpus"):
        GraphIndex.load(directory, DocStore(graph.store.docs[:-1]), graph.settings)
    other = graph.settings.model_copy(update={"embedder": graph.settings.embedder.model_copy(update={"model": "other"})})
    with pytest.raises(IndexLoadError, match="embedder"):
        GraphIndex.load(directory, graph.store, other)
    broken = tmp_path / "graph"
    shutil.copytree(directory, broken)
    (broken / GRAPH_NPZ).write_bytes(b"not an npz")
    with pytest.raises(IndexLoadError, match="graph.npz"):
        GraphIndex.load(broken, graph.store, graph.settings)
    whole = (directory / GRAPH_NPZ).read_bytes()
    for cut in (len(whole) // 2, len(whole) - 30, 100):  # a copy or a download that stopped early
        (broken / GRAPH_NPZ).write_bytes(whole[:cut])
        with pytest.raises(IndexLoadError, match="graph.npz: corrupt graph arrays.*rebuild it"):
            GraphIndex.load(broken, graph.store, graph.settings)


def test_triples_source_returns_facts_with_their_passages(musique):
    graph, _, questions = musique
    [result] = TriplesSource(graph).search([questions[0].question], k=3)
    assert len(result.hits) == 3
    for hit in result.hits:
        subject, relation, obj = hit.metadata["triple"]
        assert hit.text == f"{subject} | {relation} | {obj}" and hit.mode == "triples"
        assert hit.metadata["doc_ids"] and all(d in graph.store for d in hit.metadata["doc_ids"])
        assert hit.doc_id.startswith("t")
    assert "journal of psychotherapy integration" in result.hits[0].text


def test_hybrid_is_the_rrf_of_passage_and_graph_lists(musique):
    graph, _, questions = musique
    passage, graph_source = GraphPassageSource(graph), GraphSource(graph)
    hybrid = HybridSource(passage, graph_source)
    query = [questions[1].question]
    [result] = hybrid.search(query, k=3)
    expected = rrf([passage.search(query, 6)[0].hits, graph_source.search(query, 6)[0].hits], k=60, top=3)
    assert [h.doc_id for h in result.hits] == [h.doc_id for h in expected]
    assert [h.score for h in result.hits] == pytest.approx([h.score for h in expected])
    assert {h.mode for h in result.hits} == {"hybrid"} and result.source == "hybrid"
    assert set(questions[1].supporting_doc_ids) & {h.doc_id for h in result.hits}


def test_recognition_filter_keeps_only_facts_the_model_chose(musique):
    graph, _, questions = musique
    query = questions[0].question
    candidates = GraphSource(graph).search([query], 5)[0].metadata["facts"]
    chosen = candidates[1]["triple"]
    model = ScriptedModel([json.dumps({"fact": [chosen, ["invented", "fact", "here"]]})])
    [result] = GraphSource(graph, recognition_model=model).search([query], 5)
    assert [f["triple"] for f in result.metadata["facts"]] == [chosen]
    assert result.metadata["recognition"]["after"] == 1 and result.metadata["recognition"]["call"]["prompt_tokens"] > 0
    # nothing relevant -> dense fallback; unreadable output -> fail open (all candidates kept)
    [empty] = GraphSource(graph, recognition_model=ScriptedModel(['{"fact": []}'])).search([query], 5)
    assert empty.metadata["fallback"] == "dense" and len(empty.hits) == 5
    [garbled] = GraphSource(graph, recognition_model=ScriptedModel(["no idea"])).search([query], 5)
    assert garbled.metadata["fallback"] is None and garbled.metadata["recognition"]["error"]
    assert len(garbled.metadata["facts"]) == 5


class FixedExtractor:
    """Test double: records written by hand for a handful of passages."""

    identity = "fixed:v1"

    def __init__(self, by_title: dict[str, tuple[list[str], list[tuple[str, str, str]]]]) -> None:
        self.by_title = by_title
        self.asked: list[str] = []

    def extract(self, docs):
        self.asked += [d.title for d in docs]
        return [
            OpenIERecord(doc_id=d.doc_id, passage=d.passage, entities=self.by_title[d.title][0], triples=self.by_title[d.title][1])
            for d in docs
        ]


KINGS = {
    "Lothair II": (["Lothair II", "Lotharingia"], [("Lothair II", "king of", "Lotharingia")]),
    "Teutberga": (["Teutberga", "Boso the Elder"], [("Teutberga", "daughter of", "Boso the Elder"), ("Teutberga", "married", "Lothair II")]),
    "Ermengarde": (["Ermengarde of Tours"], [("Ermengarde of Tours", "married", "Emperor Lothair I")]),
    "Waldrada": (["King Lothair II", "Waldrada"], [("Waldrada", "mistress of", "King Lothair II")]),
}


def test_incremental_add_links_only_new_entities(home, tmp_path):
    docs = [Document.make(t, f"A passage about {t}.") for t in KINGS]
    store = DocStore(docs[:3])
    extractor = FixedExtractor(KINGS)
    graph = GraphIndex.build(store, tmp_path / "graph", IndexSettings(), extractor=extractor)
    old_entities = graph.n_entities
    old_synonyms = dict(graph.data.synonym_edges)
    old_facts = list(graph.data.facts)
    assert extractor.asked == ["Lothair II", "Teutberga", "Ermengarde"]

    new = store.add(docs[3:])
    graph.add(new, tmp_path / "graph", extractor=extractor)
    assert extractor.asked[3:] == ["Waldrada"]  # old passages are never re-extracted
    assert graph.data.facts[: len(old_facts)] == old_facts
    added = {e: w for e, w in graph.data.synonym_edges.items() if e not in old_synonyms}
    assert all(max(e) >= old_entities for e in added)  # every new synonym edge touches a new entity
    assert {e: graph.data.synonym_edges[e] for e in old_synonyms} == old_synonyms
    lothair, king = graph.entity_row("Lothair II"), graph.entity_row("King Lothair II")
    assert (min(lothair, king), max(lothair, king)) in added
    # persisted: a reload sees the same graph, and retrieval reaches the new passage through the synonym
    loaded = GraphIndex.load(tmp_path / "graph", store, graph.settings)
    assert loaded.stats() == graph.stats()
    [result] = GraphSource(loaded).search(["Who was the mistress of King Lothair II?"], 2)
    assert result.hits[0].title == "Waldrada"


def test_no_facts_falls_back_to_dense(home, tmp_path):
    docs = [Document.make(t, f"A passage about {t}.") for t in ("Alpha river", "Beta mountain", "Gamma lake")]
    empty = {d.title: ([], []) for d in docs}

    class FailingOnGamma(FixedExtractor):
        def extract(self, docs):
            return [r.model_copy(update={"error": "ner: no JSON"}) if r.passage.startswith("Gamma") else r for r in super().extract(docs)]

    graph = GraphIndex.build(DocStore(docs), tmp_path / "graph", IndexSettings(), extractor=FailingOnGamma(empty))
    assert graph.stats()["extraction_errors"] == 1
    assert GraphIndex.load(tmp_path / "graph", graph.store, graph.settings).stats() == graph.stats()  # errors persist
    [result] = GraphSource(graph).search(["Which mountain?"], 2)
    assert result.metadata["fallback"] == "dense"
    assert result.hits[0].title == "Beta mountain" and len(result.hits) == 2
    assert TriplesSource(graph).search(["Which mountain?"], 2)[0].hits == []


@pytest.mark.data
def test_bundle_with_a_spacy_graph_mounts_graph_hybrid_and_triples(home, tmp_path):
    from routerag.corpus.loaders import load_corpus
    from routerag.index.bundle import build_index, load_index

    corpus = {d.title: d for d in load_corpus(data_root() / "2wikimultihopqa" / "2wikimultihopqa_corpus.json").docs}
    docs = [corpus[t] for t in ("Lothair II", "Teutberga", "Ermengarde of Tours", "Etan Boritzer")]
    build_index(docs[:3], tmp_path / "idx", components=["graph"])
    bundle = load_index(tmp_path / "idx")
    sources = bundle_sources(bundle)
    assert {"graph", "hybrid", "triples"} <= set(sources.names())
    response = sources.search(["Who was the mother of Lothair II?"], 2, ["graph", "hybrid", "triples"])
    assert response.results["graph"][0].hits[0].title in {"Lothair II", "Ermengarde of Tours"}
    assert all(len(response.results[name][0].hits) == 2 for name in ("graph", "hybrid", "triples"))
    assert bundle.add_documents(docs[3:]) == docs[3:]
    reloaded = load_index(tmp_path / "idx")
    assert reloaded.component("graph").n_passages == 4
    hits = bundle_sources(reloaded).search_one("Which writer was born in 1950?", 1, "graph").hits
    assert hits[0].title == "Etan Boritzer"


def test_local_ppr_and_scale_approximations_rank_like_the_exact_path(musique):
    """graph.ppr=local (forward push over the memory-mapped CSR files written at build),
    prior_topk and ann=ivf: the same top passages as the exact power iteration on this graph."""
    graph, directory, questions = musique
    assert all((directory / f"csr_{name}.npy").is_file() for name in ("indptr", "indices", "probs"))
    queries = [q.question for q in questions]
    vectors = graph.embed_queries(queries)
    exact = GraphSource(graph).rank(queries, 5, vectors)
    loaded = GraphIndex.load(directory, graph.store, graph.settings)
    assert isinstance(loaded.local_ppr.indices, np.memmap)
    local = GraphSource(loaded, ppr="local").rank(queries, 5, vectors)
    for (a, meta_a), (b, meta_b) in zip(exact, local):
        assert [h.doc_id for h in a] == [h.doc_id for h in b]
        np.testing.assert_allclose([h.score for h in a], [h.score for h in b], atol=1e-4)
        assert [h.metadata["dense_score"] for h in a] == pytest.approx([h.metadata["dense_score"] for h in b], abs=1e-5)
        assert [n["node"] for n in meta_a["top_nodes"][:3]] == [n["node"] for n in meta_b["top_nodes"][:3]]
    scaled = graph.settings.model_copy(
        update={"graph": graph.settings.graph.model_copy(update={"ppr": "local", "prior_topk": 10, "ann": "ivf"})}
    )
    approx = GraphIndex.load(directory, graph.store, scaled)
    for (a, _), (b, _) in zip(exact, GraphSource(approx).rank(queries, 5, vectors)):
        assert [h.doc_id for h in a][:2] == [h.doc_id for h in b][:2]
