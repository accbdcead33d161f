"""The WikiTableQuestions datasets on the real release files (``shared/data/wikitablequestions``;
skipped without the data folder)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from routerag.corpus.contamination import check_overlap
from routerag.corpus.datasets import load_dataset
from routerag.corpus.wikitablequestions import WTQ_FOLDER, load_tables, read_table
from routerag.eval.metrics import score_answer
from routerag.eval.wtq import denotation_match

pytestmark = pytest.mark.data


@pytest.fixture(scope="module")
def wtq(shared: Path):
    if not (shared / WTQ_FOLDER / "csv").is_dir():
        pytest.skip(f"{shared / WTQ_FOLDER} is not in the shared data")
    return load_dataset("wtq"), load_dataset("wtq-train")


def test_every_table_is_read_whole_and_rectangular(shared: Path, wtq) -> None:
    tables = load_tables(shared / WTQ_FOLDER)
    assert len(tables) == 2108 and all(t.title and t.rows for t in tables)
    first = read_table(shared / WTQ_FOLDER, "csv/200-csv/0.csv")
    assert first.title == "Renaissance (band)" and first.header[:3] == ["Year", "Title", "Chart-Positions UK"]
    assert sum(len(t.rows) for t in tables) == 57960


def test_the_splits_and_their_questions(wtq) -> None:
    test, train = wtq
    assert (len(test.questions), len(train.questions)) == (4344, 14152)
    assert test.questions[0].qid == "nu-0" and test.questions[0].answers == ["Italy"]
    assert train.questions[3].answers == ["12,467"]
    assert sum(len(q.answers) > 1 for q in test.questions) == 115  # list answers
    ids = {d.doc_id for d in test.corpus}
    assert all(q.answer_scheme == "wtq" and q.supporting_doc_ids and set(q.supporting_doc_ids) <= ids for q in test.questions)
    # the test tables are never seen in training
    assert not {q.metadata["table_id"] for q in test.questions} & {q.metadata["table_id"] for q in train.questions}
    assert {d.doc_id for d in train.corpus} == ids and test.index_name == train.index_name == "wtq"


def test_the_default_layout_keeps_every_document_short(wtq) -> None:
    test, _ = wtq
    lengths = sorted(len(d.text) for d in test.corpus)
    assert 2104 < len(lengths) < 5000 and lengths[int(0.99 * len(lengths))] <= 2000


def test_every_gold_list_scores_itself(wtq) -> None:
    for q in wtq[0].questions + wtq[1].questions:
        assert denotation_match(" | ".join(q.answers), q.answers) == 1.0, q.qid
        assert score_answer(" | ".join(q.answers), q.answers, ["em", "cover_em"], scheme="wtq")["em"] == 1.0


def test_the_text_and_tables_mix(wtq) -> None:
    mix = load_dataset("2wiki-wtq")
    assert len(mix.questions) == 200 and Counter(q.gold_source for q in mix.questions) == {"text": 100, "tables": 100}
    assert [q.qid for q in mix.questions[:100]] == [q.qid for q in load_dataset("2wiki", n_questions=100).questions]
    assert {q.qid for q in mix.questions[100:]} <= {q.qid for q in wtq[0].questions}
    assert {name: len(spec.docs) for name, spec in mix.sources.items()} == {"text": 6119, "tables": len(wtq[0].corpus)}
    sample = load_dataset("2wiki-wtq", n_questions=50).questions  # any evenly spaced sample stays balanced
    assert Counter(q.gold_source for q in sample) == {"text": 25, "tables": 25}
    assert check_overlap(load_dataset("2wiki-train").questions, mix.questions).clean
