"""OpenIE providers: precomputed HippoRAG files, the cache, spaCy on real passages, LLM parsing."""

from __future__ import annotations

import json

import pytest

from routerag.corpus.datasets import data_root
from routerag.corpus.loaders import load_corpus
from routerag.corpus.schema import Document
from routerag.index.openie.base import EXTRACTORS, OpenIERecord, normalise_phrase
from routerag.index.openie.cache import CachedExtractor, OpenIECache, OpenIEFileError, read_openie_file
from routerag.index.openie.llm_extractor import LLMOpenIE, parse_entities, parse_triples
from routerag.index.openie.precomputed import PrecomputedOpenIE
from routerag.llm.scripted import ScriptedModel

pytestmark = pytest.mark.integration
MUSIQUE = "musique_train100"
OPENIE_FILE = "openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json"


@pytest.fixture(scope="module")
def musique_docs(shared) -> list[Document]:
    return load_corpus(shared / MUSIQUE / "musique_train_corpus.json").docs[:5]


# ------------------------------------------------------------------ precomputed
def test_precomputed_matches_real_passages_and_reports_unmatched(musique_docs):
    extractor = PrecomputedOpenIE(data_root() / MUSIQUE / OPENIE_FILE)
    stranger = Document.make("Nowhere", "A passage that no OpenIE file has seen.")
    spaced = Document.make(musique_docs[1].title, "  " + musique_docs[1].text.replace(" ", "  ") + " ")
    records = extractor.extract([*musique_docs, stranger, spaced])
    assert all(r.error is None and r.triples for r in records[:5])
    first = records[0]
    assert first.doc_id == musique_docs[0].doc_id
    assert ("Journal of Mathematical Physics", "published by", "American Institute of Physics") in first.triples
    assert records[5].error and not records[5].triples
    assert extractor.unmatched == [stranger.doc_id]
    assert records[6].triples == records[1].triples  # whitespace-normalised match
    assert records[6].passage == spaced.passage  # keyed by our text
    assert extractor.identity.startswith(f"precomputed:{OPENIE_FILE}:")


def test_bad_openie_files_name_file_and_entry(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(OpenIEFileError, match="bad.json: not valid JSON"):
        read_openie_file(bad)
    bad.write_text(json.dumps({"docs": [{"passage": "x", "extracted_entities": []}, {"extracted_triples": []}]}))
    with pytest.raises(OpenIEFileError, match=r"bad.json: docs\[1\]: missing \"passage\""):
        read_openie_file(bad)
    bad.write_text(json.dumps({"docs": [{"passage": "x", "extracted_triples": "oops"}]}))
    with pytest.raises(OpenIEFileError, match="extracted_triples"):
        read_openie_file(bad)
    with pytest.raises(OpenIEFileError, match="no such OpenIE file"):
        read_openie_file(tmp_path / "missing.json")


def test_malformed_triples_inside_a_record_are_dropped(tmp_path):
    path = tmp_path / "o.json"
    triples = [["a", "b", "c"], ["a", "b"], ["x", "", "y"], [1, "in", "year"], ["same", "is", "Same"], "abc"]
    path.write_text(json.dumps({"docs": [{"passage": "T\nbody", "extracted_entities": ["a", 3, ""], "extracted_triples": triples}]}))
    record = PrecomputedOpenIE(path).extract([Document.make("T", "body")])[0]
    assert record.triples == [("a", "b", "c"), ("1", "in", "year")]
    assert record.entities == ["a"]


# ------------------------------------------------------------------ cache
class CountingExtractor:
    """Test double: one fixed triple per passage, counting what it was asked."""

    identity = "counting:v1"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def extract(self, docs):
        self.seen += [d.doc_id for d in docs]
        return [OpenIERecord(doc_id=d.doc_id, passage=d.passage, entities=[d.title], triples=[(d.title, "has", "text")]) for d in docs]


def test_cache_serves_known_passages_and_writes_hipporag_format(tmp_path):
    docs = [Document.make(f"T{i}", f"text {i}") for i in range(3)]
    inner = CountingExtractor()
    cached = CachedExtractor(inner, OpenIECache(tmp_path / "cache.json"))
    first = cached.extract(docs[:2])
    assert inner.seen == [docs[0].doc_id, docs[1].doc_id] and cached.misses == 2
    data = json.loads((tmp_path / "cache.json").read_text())
    assert {d["passage"] for d in data["docs"]} == {docs[0].passage, docs[1].passage}
    assert data["ents_by_doc"] == [["T0"], ["T1"]]
    # a fresh process: the file alone answers for the first two
    again = CachedExtractor(inner, OpenIECache(tmp_path / "cache.json"))
    records = again.extract(docs)
    assert inner.seen[2:] == [docs[2].doc_id] and again.hits == 2
    assert [r.triples for r in records[:2]] == [r.triples for r in first]
    assert [r.doc_id for r in records] == [d.doc_id for d in docs]


# ------------------------------------------------------------------ spaCy
@pytest.mark.data
def test_spacy_extractor_yields_sensible_triples_on_real_passages():
    corpus = load_corpus(data_root() / "2wikimultihopqa" / "2wikimultihopqa_corpus.json").docs
    by_title = {d.title: d for d in corpus}
    docs = [by_title["Lothair II"], by_title["Teutberga"], by_title["Ermengarde of Tours"]]
    extractor = EXTRACTORS.get("spacy")()
    records = extractor.extract(docs)
    lothair, teutberga, ermengarde = records
    norm = lambda triples: {tuple(normalise_phrase(p) for p in t) for t in triples}  # noqa: E731
    assert ("lothair ii", "be king of", "lotharingia") in norm(lothair.triples)
    assert ("lothair ii", "be married to", "teutberga") in norm(lothair.triples)  # "He was married to" -> title
    assert ("teutberga", "be sister of", "hucbert") in norm(teutberga.triples)
    assert ("ermengarde of tours", "be daughter of", "hugh of tours") in norm(ermengarde.triples)
    for record in records:
        assert record.entities[0] == docs[records.index(record)].title
        assert not {t[0].lower() for t in record.triples} & {"he", "she", "it", "they"}
        assert all(len(t) == 3 and all(t) for t in record.triples)


# ------------------------------------------------------------------ LLM
NER_OK = '{"named_entities": ["Lothair II", "Lotharingia", "855"]}'
TRIPLES_OK = '{"triples": [["Lothair II", "king of", "Lotharingia"], ["Lothair II", "reigned from", "855"]]}'


def test_llm_extractor_runs_ner_then_triples():
    model = ScriptedModel([NER_OK, TRIPLES_OK])
    extractor = LLMOpenIE(model)
    doc = Document.make("Lothair II", "Lothair II was the king of Lotharingia from 855.")
    [record] = extractor.extract([doc])
    assert record.error is None
    assert record.entities == ["Lothair II", "Lotharingia", "855"]
    assert record.triples == [("Lothair II", "king of", "Lotharingia"), ("Lothair II", "reigned from", "855")]
    second_prompt = model.calls[1].messages[-1].content
    assert doc.passage in second_prompt and '"Lotharingia"' in second_prompt  # conditioned on the NER output
    assert extractor.identity == "llm:scripted:v1"


@pytest.mark.parametrize(
    "text",
    [
        'Sure! Here are the entities:\n```json\n{"named_entities": ["A", "B"]}\n```\nHope this helps.',
        '{"named_entities": ["A", "B",]}',
        "{'named_entities': ['A', 'B']}",
        '["A", "B"]',
        'The answer is {"named_entities": ["A", "B"]} as requested',
    ],
)
def test_entity_parsing_repairs_common_small_model_output(text):
    assert parse_entities(text) == ["A", "B"]


def test_truncated_triples_are_salvaged():
    text = '{"triples": [["A", "born in", "B"], ["A", "works at", "C"], ["A", "liv'
    assert parse_triples(text) == [("A", "born in", "B"), ("A", "works at", "C")]


@pytest.mark.parametrize(
    "outputs, error",
    [
        (["I cannot help with that."], "ner"),
        (['{"entities": ["A"]}'], "ner"),  # wrong key
        (['{"named_entities": "A"}'], "ner"),  # not a list
        ([NER_OK, "no triples here"], "triples"),
        ([NER_OK, '{"facts": []}'], "triples"),
        ([], "model failed"),  # the backend raises ModelError
    ],
)
def test_bad_llm_output_gives_an_empty_record_and_a_counted_error(outputs, error):
    extractor = LLMOpenIE(ScriptedModel(outputs))
    docs = [Document.make("T", "Some text.")]
    [record] = extractor.extract(docs)
    assert record.error and error in record.error
    assert record.triples == []
    assert extractor.errors == 1 and extractor.error_log[0].startswith(docs[0].doc_id)


def test_llm_errors_do_not_stop_the_batch():
    outputs = ["garbage", NER_OK, TRIPLES_OK]
    extractor = LLMOpenIE(ScriptedModel(outputs))
    records = extractor.extract([Document.make("A", "one"), Document.make("B", "two")])
    assert records[0].error and records[1].error is None and records[1].triples
    assert extractor.errors == 1


def test_llm_openie_reads_python_style_replies_through_the_shared_lenient_json():
    """The extractor's JSON parsing is routerag.jsontext's (one implementation with the strategies'):
    single-quoted Python literals, fences with a language tag and trailing commas are read."""
    reply = "```python\n{'triples': [['Ann', 'born in', 'Paris'],]}\n```"
    assert [tuple(t) for t in parse_triples(reply)] == [("Ann", "born in", "Paris")]
    assert parse_entities("{'named_entities': ['Ann', 'Paris']}") == ["Ann", "Paris"]
    with pytest.raises(ValueError):
        parse_entities("no entities here")
