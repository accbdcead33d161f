"""Named datasets over the shared benchmark files, the bundled demo and table sets, ``file:`` paths."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from routerag.corpus.datasets import (
    DataNotFoundError,
    Dataset,
    bundled_data_dir,
    dataset_names,
    load_dataset,
    register_dataset,
)
from routerag.corpus.loaders import load_corpus
from routerag.corpus.readers import iter_json
from routerag.registry import UnknownNameError

PROJECT = Path(__file__).resolve().parents[2]


def _ids(dataset: Dataset) -> set[str]:
    return {d.doc_id for d in dataset.documents()}


@pytest.mark.data
def test_names_and_unknown_name() -> None:
    assert {"2wiki", "musique", "hotpotqa", "hotpotqa-distractor", "hotpotqa-distractor-train", "law-med",
            "2wiki-multisource", "demo", "tables"} <= set(dataset_names())
    with pytest.raises(UnknownNameError) as err:
        load_dataset("2wikii")
    message = str(err.value)
    assert "'2wikii'" in message and "2wiki-multisource" in message and "law-med" in message and "file:<path>" in message


@pytest.mark.data
def test_2wiki(shared: Path) -> None:
    data = load_dataset("2wiki")
    assert (len(data.questions), len(data.corpus), data.multisource) == (1000, 6119, False)
    assert data.questions[0].qid == "2wiki-0" and data.questions[0].answer == "20 March 851"
    assert data.reports[0].loaded == 6119 and data.reports[0].duplicates == 0


@pytest.mark.data
def test_musique_supporting_ids_are_corpus_ids(shared: Path) -> None:
    data = load_dataset("musique")
    assert (len(data.questions), len(data.corpus)) == (100, 1890)
    assert data.openie_path is not None and data.openie_path.name.startswith("openie_musique_train")
    ids = _ids(data)
    for q in data.questions:
        assert q.supporting_doc_ids and set(q.supporting_doc_ids) <= ids
        assert all(set(hop.supporting_doc_ids) <= ids for hop in q.decomposition)
        assert 2 <= len(q.decomposition) <= 4


@pytest.mark.data
def test_hotpotqa(shared: Path) -> None:
    data = load_dataset("hotpotqa")
    assert (len(data.questions), len(data.corpus)) == (100, 994)
    assert all(len(q.supporting_doc_ids) == 2 and set(q.supporting_doc_ids) <= _ids(data) for q in data.questions)


@pytest.mark.data
def test_hotpotqa_distractor_held_out_and_training_corpora(shared: Path) -> None:
    test, train = load_dataset("hotpotqa-distractor"), load_dataset("hotpotqa-distractor-train")
    assert (len(test.questions), len(train.questions)) == (500, 600)
    # pooled contexts, each paragraph (title + text) once: 4,992 / 5,967 context paragraphs in the files
    assert (len(test.corpus), test.reports[0].duplicates) == (4948, 44)
    assert (len(train.corpus), train.reports[0].duplicates) == (5913, 54)
    for data in (test, train):
        ids, by_id = _ids(data), {d.doc_id: d for d in data.corpus}
        assert len(ids) == len(data.corpus)
        for q in data.questions:  # every question's two gold paragraphs are in its corpus, by title
            assert len(q.supporting_doc_ids) == 2 and set(q.supporting_doc_ids) <= ids
            assert [by_id[i].title for i in q.supporting_doc_ids] == q.metadata["supporting_titles"]
            assert q.metadata["type"] in {"bridge", "comparison"} and q.metadata["supporting_facts"]
    assert not {q.qid for q in test.questions} & {q.qid for q in train.questions}
    assert {q.dataset for q in test.questions} == {"hotpotqa-distractor"}
    assert [q.qid for q in load_dataset("hotpotqa-distractor", n_questions=100).questions][:2] == [
        test.questions[0].qid, test.questions[5].qid]


@pytest.mark.data
def test_hotpotqa_distractor_is_disjoint_from_the_evaluation_sets(shared: Path) -> None:
    from routerag.train.golden import check_overlap

    train = load_dataset("hotpotqa-distractor-train").questions
    assert check_overlap(train, ["hotpotqa-distractor", "hotpotqa", "2wiki", "musique"]).clean


@pytest.mark.data
def test_2wiki_train_is_2wiki_without_its_evaluation_sample_on_the_same_index(shared: Path) -> None:
    from routerag.eval.config import EvalConfig
    from routerag.run.assemble import index_root
    from routerag.train.golden import check_overlap

    full, train = load_dataset("2wiki"), load_dataset("2wiki-train")
    held_out = {q.qid for q in load_dataset("2wiki", n_questions=100).questions}
    assert len(train.questions) == 900 and not held_out & {q.qid for q in train.questions}
    assert {q.qid for q in train.questions} | held_out == {q.qid for q in full.questions}
    assert check_overlap(train.questions, ["2wiki:100"]).clean
    config = EvalConfig(dataset="2wiki-train", components=["dense", "bm25", "graph"])
    assert index_root(train, config) == index_root(full, config.model_copy(update={"dataset": "2wiki"}))


@pytest.mark.data
def test_law_med_sources_profiles_and_gold(shared: Path) -> None:
    data = load_dataset("law-med")
    assert data.multisource and list(data.sources) == ["law", "med"]
    law, med = data.sources["law"], data.sources["med"]
    assert (len(law.docs), len(med.docs), law.role, med.role) == (200, 200, "local", "global")
    assert "legal" in law.profile and "clinical" in med.profile
    assert all(d.source == "law" for d in law.docs) and all(d.source == "med" for d in med.docs)
    assert len(data.questions) == 400
    assert {q.gold_source for q in data.questions} == {"law", "med"}
    by_id = {d.doc_id: d for d in data.documents()}
    for q in data.questions:  # the supporting document lies in the gold source
        (doc_id,) = q.supporting_doc_ids
        assert by_id[doc_id].source == q.gold_source
    assert not any(q.answer.endswith('"') and q.answer.count('"') % 2 for q in data.questions)


@pytest.mark.data
def test_r1router_steps_one_question_per_released_retrieval_step(shared: Path) -> None:
    data = load_dataset("r1router-steps")
    assert data.documents() == [] and len(data.questions) == 346  # the 346 ret steps of 119 trajectories
    golds = {q.gold_source for q in data.questions}
    assert golds == {"Text Retriever", "Table Retriever", "Text Image Retriever", "None"}
    first = data.questions[0]
    assert first.question.startswith("Origin question: ") and first.answers[0] and first.metadata["step"] == 0


@pytest.mark.data
def test_2wiki_multisource_partitions_the_2wiki_corpus(shared: Path) -> None:
    multi, single = load_dataset("2wiki-multisource"), load_dataset("2wiki")
    assert {n: len(s.docs) for n, s in multi.sources.items()} == {"local": 699, "global": 5420}
    assert multi.sources["local"].profile and multi.sources["global"].profile
    assert _ids(multi) == _ids(single)
    assert [q.qid for q in multi.questions] == [q.qid for q in single.questions]


@pytest.mark.data
def test_sampling_is_evenly_spaced(shared: Path) -> None:
    data = load_dataset("2wiki", n_questions=4)
    assert [q.qid for q in data.questions] == ["2wiki-0", "2wiki-250", "2wiki-500", "2wiki-750"]
    assert len(data.corpus) == 6119


def test_file_paths(shared: Path, tmp_path: Path) -> None:
    corpus_only = load_dataset(f"file:{shared / '2wikimultihopqa' / '2wikimultihopqa_corpus.json'}")
    assert (len(corpus_only.corpus), corpus_only.questions) == (6119, [])
    questions_with_passages = load_dataset(f"file:{shared / 'musique_train100' / 'musique_train.json'}")
    assert len(questions_with_passages.questions) == 100 and len(questions_with_passages.corpus) == 1890
    questions_only = load_dataset(f"file:{shared / 'multisource' / 'law-med_qa.json'}")
    assert len(questions_only.questions) == 400 and questions_only.corpus == []
    folder = load_dataset(f"file:{shared / 'hotpotqa_train100'}")
    assert (len(folder.questions), len(folder.corpus)) == (100, 994)
    with pytest.raises(DataNotFoundError):
        load_dataset(f"file:{tmp_path / 'nothing.json'}")


def test_register_dataset() -> None:
    register_dataset("tiny-test", lambda: Dataset(name="tiny-test"), replace=True)
    assert load_dataset("tiny-test").name == "tiny-test"


# ---------------------------------------------------------------------------------------------
# bundled data (no shared files needed)


def _mentions(text: str, phrase: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(phrase.lower()) + r"(?!\w)", text.lower()) is not None


def test_demo_answers_occur_in_its_corpus() -> None:
    data = load_dataset("demo")
    assert 20 <= len(data.questions) <= 30 and 300 <= len(data.corpus) <= 600
    text = "\n".join(d.passage for d in data.corpus)
    missing = [q.answer for q in data.questions if not _mentions(text, q.answer)]
    assert missing == []
    assert all(q.qid.startswith("2wiki-") for q in data.questions)
    size = sum(p.stat().st_size for p in (bundled_data_dir() / "demo").glob("2wiki_*"))
    assert size < 400_000
    assert data.reports[0].duplicates == 0 and data.reports[0].empty == 0


def test_demo_musique_has_openie_for_every_passage() -> None:
    data = load_dataset("demo-musique")
    assert data.openie_path is not None and data.openie_path.parent == bundled_data_dir() / "demo"
    assert 3 <= len(data.questions) <= 6
    openie_docs, _ = load_corpus(data.openie_path)
    assert {d.doc_id for d in openie_docs} == _ids(data)
    records = next(v for w, v in iter_json(data.openie_path) if w.key == "docs")
    assert all(r["extracted_triples"] and r["passage"] == f"{r['title']}\n{r['text']}" for r in records)
    ids = _ids(data)
    assert all(q.supporting_doc_ids and set(q.supporting_doc_ids) <= ids for q in data.questions)
    assert {q.metadata["hops"] for q in data.questions} == {2, 3, 4}


def test_tables_dataset() -> None:
    data = load_dataset("tables")
    assert len(data.corpus) == 115 and len(data.questions) == 12
    text = "\n".join(d.text for d in data.corpus)
    assert all(_mentions(text, q.answer) for q in data.questions)
    assert all(d.metadata["kind"] == "table" for d in data.corpus)


def test_bundled_attribution_files() -> None:
    demo = (bundled_data_dir() / "demo" / "ATTRIBUTION.md").read_text(encoding="utf-8")
    assert "Apache-2.0" in demo and "CC BY 4.0" in demo
    assert (bundled_data_dir() / "tables" / "ATTRIBUTION.md").is_file()


def test_demo_data_regenerates_identically(shared: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_demo_data", PROJECT / "docs" / "experiments" / "scripts" / "make_demo_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    files = module.build(shared)
    for name, text in files.items():
        assert (bundled_data_dir() / "demo" / name).read_text(encoding="utf-8") == text, name
    json.loads(files["openie_musique.json"])  # strict JSON: no NaN


def test_demo_tables_is_text_and_tables_as_two_sources_with_gold_sources():
    """The bundled text + table set (R1-Router's two knowledge bases): both bundled corpora as named
    sources, every question with the source its answer lives in."""
    from routerag.corpus.datasets import load_dataset

    data = load_dataset("demo-tables")
    text, tables = load_dataset("demo"), load_dataset("tables")
    assert data.multisource and sorted(data.sources) == ["tables", "text"]
    assert len(data.sources["text"].docs) == len(text.corpus) and len(data.sources["tables"].docs) == len(tables.corpus)
    assert {d.source for d in data.sources["tables"].docs} == {"tables"}
    assert [q.gold_source for q in data.questions] == ["text"] * len(text.questions) + ["tables"] * len(tables.questions)
    assert {q.qid for q in data.questions} == {q.qid for q in text.questions} | {q.qid for q in tables.questions}
