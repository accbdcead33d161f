"""WikiTableQuestions without the shared data: its TSV and CSV escapes, tables as documents, the
``wtq`` / ``2wiki-wtq`` datasets over a tiny folder in the release's layout, and its evaluator's
scoring rules (lists as sets, numbers by value, dates, normalisation) hooked into ``em``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from routerag.corpus.datasets import load_dataset
from routerag.corpus.schema import Question
from routerag.corpus.tables import Table, row_groups, table_documents
from routerag.corpus.wikitablequestions import (
    TableLayout,
    read_examples,
    read_table,
    table_corpus,
    tsv_unescape,
    tsv_unescape_list,
)
from routerag.eval.metrics import check_schemes, score_answer
from routerag.eval.runner import record_question
from routerag.eval.wtq import denotation_match, normalize, prediction_items, to_value
from routerag.registry import UnknownNameError
from routerag.trace import Trace

pytestmark = pytest.mark.unit

MEDALS = '''"Rank","Nation","Gold\nmedals","Note"
"1","Italy","5","host \\"A\\""
"2","France","3","back\\\\slash"
"3","Kenya","3",""
'''
ALBUMS = '''"Year","Title"
"1969","Renaissance"
"1971","Illusion"
'''
TSV = ("id\tutterance\tcontext\ttargetValue\n"
       "nu-0\twhich nation won the most gold medals?\tcsv/203-csv/1.csv\tItaly\n"
       "nu-1\twhich nations won 3 gold medals?\tcsv/203-csv/1.csv\tFrance|Kenya\n"
       "nu-2\twhat was the\\ptitle in 1971?\tcsv/204-csv/7.csv\tIllusion\n")
TRAIN = ("id\tutterance\tcontext\ttargetValue\n"
         "nt-0\tin which year was renaissance released?\tcsv/204-csv/7.csv\t1969\n")


def _release(root: Path) -> Path:
    """A WikiTableQuestions folder (two tables, one repeated, pages, both question files) under ``root``."""
    folder = root / "wikitablequestions"
    for sub, number, text, title in (("203", 1, MEDALS, "1990 Games medal table"), ("204", 7, ALBUMS, "Renaissance (band)"),
                                     ("204", 9, ALBUMS, "Renaissance (band)")):
        (folder / "csv" / f"{sub}-csv").mkdir(parents=True, exist_ok=True)
        (folder / "page" / f"{sub}-page").mkdir(parents=True, exist_ok=True)
        (folder / "csv" / f"{sub}-csv" / f"{number}.csv").write_text(text, encoding="utf-8")
        (folder / "page" / f"{sub}-page" / f"{number}.json").write_text(json.dumps({"title": title}), encoding="utf-8")
    (folder / "data").mkdir()
    (folder / "data" / "pristine-unseen-tables.tsv").write_text(TSV, encoding="utf-8")
    (folder / "data" / "training.tsv").write_text(TRAIN, encoding="utf-8")
    return folder


def _two_wiki(root: Path) -> None:
    folder = root / "2wikimultihopqa"
    folder.mkdir()
    corpus = [{"title": "Ann Lee", "text": "Ann Lee was born in Paris in 1901."},
              {"title": "Bo Yin", "text": "Bo Yin directed the film Red Sky."}]
    (folder / "2wikimultihopqa_corpus.json").write_text(json.dumps(corpus), encoding="utf-8")
    questions = [{"question": "Where was Ann Lee born?", "answer": "Paris"},
                 {"question": "Who directed Red Sky?", "answer": "Bo Yin"},
                 {"question": "When was Ann Lee born?", "answer": "1901"}]
    (folder / "2wikimultihopqa_questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _release(tmp_path)
    _two_wiki(tmp_path)
    monkeypatch.setenv("ROUTERAG_DATA_DIR", str(tmp_path))
    return tmp_path


def test_tsv_escapes_are_undone_in_one_pass() -> None:
    assert tsv_unescape(r"a\pb\nc\\p") == "a|b\nc\\p"
    assert tsv_unescape_list(r"France|Kenya\p2") == ["France", "Kenya|2"]


def test_questions_tables_and_page_titles_are_read_with_the_release_escapes(tmp_path: Path) -> None:
    folder = _release(tmp_path)
    examples = read_examples(folder / "data" / "pristine-unseen-tables.tsv")
    assert [e.qid for e in examples] == ["nu-0", "nu-1", "nu-2"]
    assert examples[1].targets == ["France", "Kenya"] and examples[2].question == "what was the|title in 1971?"
    table = read_table(folder, "csv/203-csv/1.csv")
    assert table.title == "1990 Games medal table" and table.table_id == "csv/203-csv/1.csv"
    assert table.header == ["Rank", "Nation", "Gold medals", "Note"]  # the newline inside a header cell collapsed
    assert table.rows[0][3] == 'host "A"' and table.rows[1][3] == "back\\slash"


def test_a_table_becomes_whole_or_row_group_documents() -> None:
    table = Table(title="T", header=["a", "b"], rows=[[str(i), "x" * 30] for i in range(10)], table_id="t")
    whole = table_documents(table, rows_per_doc=None, style="grid")
    assert len(whole) == 1 and whole[0].text.splitlines()[:3] == ["Title: T", "a | b", f"0 | {'x' * 30}"]
    assert [(d.metadata["row_start"], d.metadata["row_end"]) for d in table_documents(table, rows_per_doc=4, style="grid")] \
        == [(0, 4), (4, 8), (8, 10)]
    capped = table_documents(table, rows_per_doc=None, style="grid", max_chars=120)
    assert len(capped) > 1 and all(len(d.text) <= 120 for d in capped)
    assert all(d.text.startswith("Title: T\na | b\n") for d in capped)  # every part keeps title and header
    assert row_groups(table, rows_per_doc=None, max_chars=120, style="grid")[-1][1] == 10
    assert row_groups(table, rows_per_doc=None, max_chars=10, style="grid") == [(i, i + 1) for i in range(10)]  # a long row alone


def test_a_repeated_table_is_one_document_shared_by_both_ids(tmp_path: Path) -> None:
    folder = _release(tmp_path)
    tables = [read_table(folder, t) for t in ("csv/204-csv/7.csv", "csv/204-csv/9.csv")]
    corpus = table_corpus(tables, TableLayout())
    assert len(corpus.docs) == 1 and corpus.doc_ids["csv/204-csv/7.csv"] == corpus.doc_ids["csv/204-csv/9.csv"]
    assert len(table_corpus(tables, TableLayout(rows_per_doc=1)).docs) == 2


def test_wtq_datasets_over_a_folder_in_the_release_layout(data_dir: Path) -> None:
    test, train = load_dataset("wtq"), load_dataset("wtq-train")
    assert [q.qid for q in test.questions] == ["nu-0", "nu-1", "nu-2"] and [q.qid for q in train.questions] == ["nt-0"]
    assert test.index_name == train.index_name == "wtq" and {d.doc_id for d in test.corpus} == {d.doc_id for d in train.corpus}
    ids = {d.doc_id for d in test.corpus}
    for q in test.questions:
        assert q.answer_scheme == "wtq" and q.supporting_doc_ids and set(q.supporting_doc_ids) <= ids
    assert test.questions[1].answers == ["France", "Kenya"] and test.questions[1].metadata["table_id"] == "csv/203-csv/1.csv"
    assert "Italy" in next(d.text for d in test.corpus if d.doc_id == test.questions[0].supporting_doc_ids[0])


def test_the_text_and_tables_mix_has_two_sources_and_a_gold_source_per_question(data_dir: Path) -> None:
    mix = load_dataset("2wiki-wtq")
    assert sorted(mix.sources) == ["tables", "text"]
    assert {d.source for d in mix.sources["text"].docs} == {"text"} and {d.source for d in mix.sources["tables"].docs} == {"tables"}
    assert all(mix.sources[name].profile for name in mix.sources)
    assert [q.gold_source for q in mix.questions] == ["text"] * 3 + ["tables"] * 3
    assert [q.metadata["type"] for q in mix.questions] == [q.gold_source for q in mix.questions]
    assert [q.qid for q in mix.questions[:3]] == [q.qid for q in load_dataset("2wiki").questions]
    assert {q.answer_scheme for q in mix.questions} == {None, "wtq"} and {q.dataset for q in mix.questions} == {"2wiki-wtq"}


def test_the_mix_takes_its_text_questions_from_the_2wiki_evaluation_sample_only() -> None:
    from routerag.corpus.wtq_datasets import text_tables_mix

    with pytest.raises(ValueError, match="evaluation sample"):
        text_tables_mix(per_source=101)


@pytest.mark.parametrize(("raw", "expected"), [
    ("Café", "cafe"), ("“Wolfe Tones”", "wolfe tones"), ("Team A (USA)", "team a"), ("Team A[1]", "team a"),
    ("Team A†", "team a"), ("1–2", "1-2"), ("Done.", "done"), ("  Two   words ", "two words"), ("(1990)", "(1990)"),
])
def test_normalisation_follows_the_evaluator(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


def test_values_numbers_and_dates() -> None:
    assert to_value("12,467").number == 12467 and to_value("3.50").number == 3.5 and to_value("1,2").number is None
    assert to_value("1990").number == 1990  # a year alone is the number
    assert to_value("1990-01-02").date == to_value("January 2, 1990").date == to_value("2 Jan 1990").date == (1990, 1, 2)
    assert to_value("xx-01-02").date == (-1, 1, 2) and to_value("March 1990").date == (1990, 3, -1)
    assert to_value("Italy").number is None and to_value("Italy").date is None


@pytest.mark.parametrize(("prediction", "targets", "expected"), [
    ("Italy", ["Italy"], 1.0),
    ("italy.", ["Italy"], 1.0),
    ("12467", ["12,467"], 1.0),  # numbers by value
    ("3.0", ["3"], 1.0),
    ("4", ["3"], 0.0),
    ("1990-01-02", ["January 2, 1990"], 1.0),  # dates by their fields
    ("xx-01-02", ["1990-01-02"], 0.0),  # an unknown year is not a match
    ("Bangkok, Thailand", ["Bangkok, Thailand"], 1.0),  # a one-item gold is never split
    ("Italy", ["Italy", "France"], 0.0),  # every item is needed ...
    ("France|Italy", ["Italy", "France"], 1.0),  # ... in any order (sets)
    ("France, Italy", ["Italy", "France"], 1.0),
    ("France, Italy, Spain", ["Italy", "France"], 0.0),  # and no more
    ("Trinidad and Tobago, Jamaica", ["Jamaica", "Trinidad and Tobago"], 1.0),
    ("Jamaica and Cuba", ["Cuba", "Jamaica"], 1.0),
    ("1,000, 2,000", ["1000", "2000"], 1.0),  # a comma inside a number does not split
    ("1", ["1", "1.0"], 1.0),  # the gold is a set: 1 and 1.0 are one item
])
def test_denotation_match(prediction: str, targets: list[str], expected: float) -> None:
    assert denotation_match(prediction, targets) == expected


def test_prediction_readings() -> None:
    assert prediction_items("a | b", 1) == [["a", "b"]]
    assert prediction_items("a, b and c", 3) == [["a, b and c"], ["a", "b and c"], ["a", "b", "c"]]


def test_the_wtq_scheme_scores_em_its_way_and_the_other_metrics_over_the_whole_list() -> None:
    scores = score_answer("France and Italy", ["Italy", "France"], scheme="wtq")
    assert scores["em"] == 1.0 and scores["cover_em"] == 1.0 and 0 < scores["f1"] < 1
    assert score_answer("Italy", ["Italy", "France"], scheme="wtq")["cover_em"] == 0.0
    assert score_answer("Italy", ["Italy", "France"])["em"] == 1.0  # as aliases: one is enough
    assert score_answer("12,467", ["12467"], ["em"], scheme="wtq") == {"em": 1.0}
    check_schemes([None, "wtq"])
    with pytest.raises(UnknownNameError, match="wtq"):
        check_schemes(["wtqq"])


def test_an_evaluation_record_is_scored_by_the_question_s_scheme() -> None:
    q = Question(qid="nu-1", question="which nations?", answers=["France", "Kenya"], answer_scheme="wtq")
    record = record_question(Trace(question=q.question, strategy="s", qid=q.qid, answer="Kenya, France"), q, 0,
                             metrics=["em", "cover_em"])
    assert record.metrics == {"em": 1.0, "cover_em": 1.0} and record.answer_scheme == "wtq"
    plain = record_question(Trace(question=q.question, strategy="s", qid=q.qid, answer="Kenya"),
                            q.model_copy(update={"answer_scheme": None}), 0, metrics=["em"])
    assert plain.metrics == {"em": 1.0} and plain.answer_scheme is None
