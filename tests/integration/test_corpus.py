"""Corpus and question loaders: real formats (fixtures cut from the shared benchmark files), format
detection, streaming, and malformed files (truncated JSON, bad UTF-8, missing fields, wrong types,
CSV without a text column, duplicates, empty texts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routerag.corpus import readers
from routerag.corpus.loaders import (
    CORPUS_FORMATS,
    QUESTION_FORMATS,
    CorpusFormatError,
    attach_supporting_docs,
    detect_corpus_format,
    detect_question_format,
    iter_documents,
    load_corpus,
    load_questions,
)
from routerag.corpus.readers import iter_json
from routerag.corpus.sampling import evenly_spaced, evenly_spaced_indices
from routerag.corpus.schema import Document, doc_id_for
from routerag.corpus.tables import (
    Table,
    linearize_r1router,
    linearize_row,
    load_bundled_tables,
    load_table_csv,
    load_tables_json,
    table_documents,
)
from routerag.registry import UnknownNameError


def _first(path: Path, n: int) -> list:
    return [value for _, value in zip(range(n), (v for _, v in iter_json(path)))]


def _write_json(path: Path, value) -> Path:
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
    return path


def _write_jsonl(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# real formats, cut from the shared files


def test_hipporag_corpus_from_2wiki(shared: Path, tmp_path: Path) -> None:
    records = _first(shared / "2wikimultihopqa" / "2wikimultihopqa_corpus.json", 5)
    path = _write_json(tmp_path / "slice_corpus.json", records)
    assert detect_corpus_format(path) == "hipporag"
    docs, report = load_corpus(path)
    assert report.format == "hipporag" and report.loaded == 5 and report.duplicates == report.empty == 0
    assert [d.title for d in docs] == [r["title"] for r in records]
    assert docs[0].doc_id == doc_id_for(records[0]["title"], records[0]["text"])
    assert docs[0].title == "Teutberga" and docs[0].source == "default"


def test_hotpotqa_hf_columns_from_the_distractor_set(shared: Path, tmp_path: Path) -> None:
    """The HF ``hotpot_qa`` serialisation (context and supporting facts as columns) is HotpotQA."""
    source = shared / "hotpotqa_distractor1100" / "train.jsonl"
    records = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()[:3]]
    path = _write_jsonl(tmp_path / "hf.jsonl", records)
    assert detect_question_format(path) == "hotpotqa" and detect_corpus_format(path) == "hotpotqa"
    questions = load_questions(path)
    docs, report = load_corpus(path)
    assert report.records == sum(len(r["context"]["title"]) for r in records)
    ids = {d.doc_id for d in docs}
    first, rec = questions[0], records[0]
    assert first.qid == rec["id"] and first.answers == [rec["answer"]] and first.metadata["type"] == rec["type"]
    assert first.metadata["supporting_facts"] == [list(f) for f in zip(rec["supporting_facts"]["title"], rec["supporting_facts"]["sent_id"])]
    by_id = {d.doc_id: d for d in docs}
    for q in questions:
        assert len(q.supporting_doc_ids) == 2 and set(q.supporting_doc_ids) <= ids
        assert {by_id[i].title for i in q.supporting_doc_ids} == set(q.metadata["supporting_titles"])
    i = rec["context"]["title"].index(rec["supporting_facts"]["title"][0])
    assert by_id[first.supporting_doc_ids[0]].text == "".join(rec["context"]["sentences"][i])
    broken = dict(rec, context={"title": ["A", "B"], "sentences": [["a."]]})
    with pytest.raises(CorpusFormatError, match=r"line 1: field 'context': 2 titles but 1 sentence lists"):
        load_questions(_write_jsonl(tmp_path / "bad.jsonl", [broken]), "hotpotqa")
    broken = dict(rec, supporting_facts={"title": ["A"], "sent_id": ["zero"]})
    with pytest.raises(CorpusFormatError, match=r"field 'supporting_facts': entry 0: expected \[title, sentence_index\]"):
        load_questions(_write_jsonl(tmp_path / "bad2.jsonl", [broken]), "hotpotqa")


def test_hotpotqa_corpus_and_questions_share_doc_ids(shared: Path, tmp_path: Path) -> None:
    folder = shared / "hotpotqa_train100"
    questions_path = _write_json(tmp_path / "hq.json", _first(folder / "hotpotqa_train.json", 2))
    assert detect_question_format(questions_path) == "hotpotqa"
    questions = load_questions(questions_path, dataset="hq")
    q = questions[0]
    assert q.qid == "5a77ec115542992a6e59dff7" and q.answers == ["a spirit"]
    assert q.metadata["supporting_titles"] == ["Alû", "Lilu (mythology)"]
    assert q.metadata["level"] == "easy"
    # the passages embedded in the question file and the title -> sentences corpus give the same ids
    embedded = {d.doc_id for d in load_corpus(questions_path).docs}
    corpus = load_corpus(folder / "hotpotqa_train_corpus.json")
    assert corpus.report.format == "hotpotqa-corpus"
    assert set(q.supporting_doc_ids) <= embedded <= {d.doc_id for d in corpus.docs}
    lilu = next(d for d in corpus.docs if d.title == "Lilu (mythology)")
    assert lilu.doc_id in q.supporting_doc_ids and not lilu.text.startswith(" ")


def test_musique_questions_decomposition_and_aliases(shared: Path, tmp_path: Path) -> None:
    records = _first(shared / "musique_train100" / "musique_train.json", 2)
    path = _write_json(tmp_path / "mq.json", records)
    assert detect_question_format(path) == "musique"
    q = load_questions(path)[0]
    assert q.answers == ["G. Stanley Hall", "Stanley Hall"]  # answer + answer_aliases
    assert q.metadata == {"hops": 2, "answerable": True}
    paragraphs = {p["idx"]: p for p in records[0]["paragraphs"]}
    for hop, step in zip(q.decomposition, records[0]["question_decomposition"]):
        para = paragraphs[step["paragraph_support_idx"]]
        assert hop.supporting_doc_ids == [doc_id_for(para["title"], para["paragraph_text"])]
        assert hop.answer == step["answer"]
    assert set(q.supporting_doc_ids) == {h.supporting_doc_ids[0] for h in q.decomposition}
    # the same passages as the released corpus file
    docs, report = load_corpus(path)
    assert report.format == "musique" and report.loaded == 40
    corpus_ids = {d.doc_id for d in load_corpus(shared / "musique_train100" / "musique_train_corpus.json").docs}
    assert {d.doc_id for d in docs} <= corpus_ids


def test_2wiki_questions_jsonl(shared: Path, tmp_path: Path) -> None:
    lines = (shared / "2wikimultihopqa" / "2wikimultihopqa_questions.jsonl").read_text(encoding="utf-8").splitlines()[:3]
    path = tmp_path / "two.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert detect_question_format(path) == "qa"
    questions = load_questions(path, dataset="2wiki")
    assert [q.qid for q in questions] == ["2wiki-0", "2wiki-1", "2wiki-2"]
    assert questions[0].answers == ["20 March 851"] and questions[0].dataset == "2wiki"
    with pytest.raises(CorpusFormatError, match="load_questions"):
        load_corpus(path)


def test_realroute_questions_gold_source_and_clean_answers(shared: Path, tmp_path: Path) -> None:
    records = [r for _, r in iter_json(shared / "multisource" / "law-med_qa.json")]
    picked = [records[0], next(r for r in records if r["answer"].endswith('\n"')), records[-1]]
    path = _write_json(tmp_path / "lm_qa.json", picked)
    assert detect_question_format(path) == "realroute"
    questions = load_questions(path)
    assert [q.gold_source for q in questions] == ["law", "med", "med"]
    assert questions[0].metadata["type"] == "singlehop_law"
    assert questions[1].answer == picked[1]["answer"][: -len('\n"')]  # the stray quote line is dropped
    assert questions[0].metadata["supporting_titles"] == ["Law_00000"]
    law = load_corpus(shared / "multisource" / "law-med_corpus_local.json", source="law").docs
    linked = attach_supporting_docs(questions, law)
    assert linked[0].supporting_doc_ids == [law[0].doc_id] and law[0].source == "law"


def test_popqa_as_published_with_routerag(tmp_path: Path) -> None:
    record = {
        "id": 4222362,
        "subj": "George Rankin",
        "prop": "occupation",
        "obj": "politician",
        "question": "What is George Rankin's occupation?",
        "possible_answers": json.dumps(["politician", "political leader", "political figure"]),
        "paragraphs": [
            {"title": "George Rankin", "text": "Major General George James Rankin was an Australian soldier and politician.", "is_supporting": True},
            {"title": "George Rankin (footballer)", "text": "George Rankin was an English footballer.", "is_supporting": False},
        ],
        "s_pop": 142,
    }
    path = _write_json(tmp_path / "popqa.json", [record])
    assert detect_question_format(path) == "popqa"
    (q,) = load_questions(path)
    assert q.qid == "4222362"
    assert q.answers == ["politician", "political leader", "political figure"]
    assert q.supporting_doc_ids == [doc_id_for("George Rankin", record["paragraphs"][0]["text"])]
    assert q.metadata["prop"] == "occupation" and q.metadata["s_pop"] == 142
    docs, report = load_corpus(path)
    assert report.format == "popqa" and len(docs) == 2
    bad = _write_json(tmp_path / "popqa_bad.json", [{**record, "possible_answers": "[politician"}])
    with pytest.raises(CorpusFormatError, match="record 0.*possible_answers"):
        load_questions(bad)


def test_flashrag_jsonl(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "wiki.jsonl",
        [{"id": "0", "contents": '"Aaron"\nAaron is a prophet.'}, {"id": "1", "contents": "no title line"}],
    )
    assert detect_corpus_format(path) == "flashrag"
    docs, _ = load_corpus(path)
    assert (docs[0].title, docs[0].text, docs[0].metadata) == ("Aaron", "Aaron is a prophet.", {"orig_id": "0"})
    assert (docs[1].title, docs[1].text) == ("", "no title line")
    questions = _write_jsonl(tmp_path / "nq.jsonl", [{"id": "test_0", "question": "who?", "golden_answers": ["A", "B"]}])
    (q,) = load_questions(questions)
    assert q.qid == "test_0" and q.answers == ["A", "B"]


def test_csv_and_tsv(tmp_path: Path) -> None:
    path = tmp_path / "notes.csv"
    path.write_text('title,text,year\nA,"first, with a comma\nand a newline",1999\nB,second,\n', encoding="utf-8")
    docs, report = load_corpus(path)
    assert report.format == "csv" and len(docs) == 2
    assert docs[0].text == "first, with a comma\nand a newline" and docs[0].metadata == {"year": "1999"}
    tsv = tmp_path / "notes.tsv"
    tsv.write_text("text\nonly text here\n", encoding="utf-8")
    (doc,), _ = load_corpus(tsv)
    assert (doc.title, doc.text) == ("", "only text here")


def test_openie_file_passages(shared: Path) -> None:
    path = next((shared / "musique_train100").glob("openie_*.json"))
    assert detect_corpus_format(path) == "openie"
    docs, report = load_corpus(path)
    corpus = load_corpus(shared / "musique_train100" / "musique_train_corpus.json").docs
    assert report.loaded == 1890 and {d.doc_id for d in docs} == {d.doc_id for d in corpus}


# ---------------------------------------------------------------------------------------------
# duplicates and empty texts are counted, not silently dropped


def test_duplicates_and_empty_texts_are_reported(tmp_path: Path) -> None:
    records = [
        {"title": "A", "text": "alpha"},
        {"title": "A", "text": "alpha"},  # duplicate
        {"title": "A", "text": "  alpha "},  # same after trimming: same doc_id, a duplicate
        {"title": "B", "text": "   "},  # empty
        {"title": "C", "text": ""},  # empty
        {"title": "B", "text": "beta"},
    ]
    docs, report = load_corpus(_write_json(tmp_path / "c.json", records))
    assert [d.title for d in docs] == ["A", "B"]
    assert (report.loaded, report.duplicates, report.empty, report.records) == (2, 2, 2, 6)
    assert "2 duplicates and 2 empty" in report.summary()


def test_source_is_set_on_every_document(tmp_path: Path) -> None:
    path = _write_json(tmp_path / "c.json", [{"title": "A", "text": "alpha"}])
    docs, report = load_corpus(path, source="law")
    assert docs[0].source == "law" and report.source == "law"


# ---------------------------------------------------------------------------------------------
# malformed files


def test_truncated_json_names_file_and_record(tmp_path: Path) -> None:
    text = json.dumps([{"title": "A", "text": "alpha"}, {"title": "B", "text": "beta"}])
    path = tmp_path / "cut.json"
    path.write_text(text[:-12], encoding="utf-8")
    with pytest.raises(CorpusFormatError) as err:
        load_corpus(path, "hipporag")
    assert str(path) in str(err.value) and "record 1" in str(err.value) and "truncated" in str(err.value)
    path.write_text(text[:-1], encoding="utf-8")  # only the closing bracket is missing
    with pytest.raises(CorpusFormatError, match="truncated"):
        load_corpus(path, "hipporag")


def test_invalid_json_syntax(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('[{"title": "A", "text": "alpha"},\n {"title": "B" "text": "beta"}]', encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"record 1, line 2: not valid JSON"):
        load_corpus(path, "hipporag")
    path.write_text('[{"title": "A", "text": "alpha"}] trailing', encoding="utf-8")
    with pytest.raises(CorpusFormatError, match="extra data"):
        load_corpus(path, "hipporag")


def test_bad_utf8_in_json_names_the_record(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    good = json.dumps({"title": "A", "text": "alpha"}).encode()
    path.write_bytes(b"[" + good + b", " + '{"title": "Café", "text": "x"}'.encode("latin-1") + b"]")
    with pytest.raises(CorpusFormatError, match=r"record 1.*not valid UTF-8"):
        load_corpus(path)


def test_bad_utf8_in_jsonl_and_csv_names_the_line(tmp_path: Path) -> None:
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(CorpusFormatError, match=r"c\.jsonl: line 2: not valid UTF-8"):
        load_corpus(jsonl)
    csv_path = tmp_path / "c.csv"
    csv_path.write_bytes(b"title,text\nA,ok\nB,caf\xe9\n")
    with pytest.raises(CorpusFormatError, match=r"c\.csv: line 3: not valid UTF-8"):
        load_corpus(csv_path)


def test_invalid_jsonl_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"text": "ok"}\n\n{"text": "cut\n', encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"line 3: not valid JSON"):
        load_corpus(path, "jsonl")


def test_missing_field_lists_the_fields_present(tmp_path: Path) -> None:
    path = _write_json(tmp_path / "c.json", [{"title": "A", "text": "alpha"}, {"title": "B", "body": "beta"}])
    with pytest.raises(CorpusFormatError) as err:
        load_corpus(path, "hipporag")
    message = str(err.value)
    assert "record 1" in message and "field 'text'" in message and "body, title" in message
    assert err.value.field == "text" and err.value.where.record == 1
    with pytest.raises(CorpusFormatError, match=r"line 1: field 'question': missing"):
        load_questions(_write_jsonl(tmp_path / "q.jsonl", [{"query": "who?", "answer": "x"}]), "qa")


def test_wrong_types(tmp_path: Path) -> None:
    with pytest.raises(CorpusFormatError, match=r"a\.json: record 0, line 1: field 'text': expected a string, got an integer"):
        load_corpus(_write_json(tmp_path / "a.json", [{"title": "A", "text": 5}]), "hipporag")
    with pytest.raises(CorpusFormatError, match=r"record 0, line 1: expected a JSON object, got a string"):
        load_corpus(_write_json(tmp_path / "b.json", ["just text"]), "hipporag")
    with pytest.raises(CorpusFormatError, match=r"field 'Alû': expected a list of sentence strings"):
        load_corpus(_write_json(tmp_path / "c.json", {"Alû": "not a list"}), "hotpotqa-corpus")
    with pytest.raises(CorpusFormatError, match=r"field 'answer': expected a string answer, got null"):
        load_questions(_write_json(tmp_path / "d.json", [{"question": "q", "answer": None}]), "qa")
    with pytest.raises(CorpusFormatError, match="paragraph_support_idx"):
        record = {"id": "x", "question": "q", "answer": "a", "paragraphs": [{"idx": 0, "title": "T", "paragraph_text": "p"}],
                  "question_decomposition": [{"question": "q1", "answer": "a", "paragraph_support_idx": 7}]}
        load_questions(_write_json(tmp_path / "e.json", [record]), "musique")


def test_csv_without_text_column(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("country,capital\nFrance,Paris\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"line 1: field 'text': no 'text' column.*country, capital.*table-csv"):
        load_corpus(path)
    ragged = tmp_path / "r.csv"
    ragged.write_text("title,text\nA,alpha\nB,beta,extra\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"line 3: has 3 fields; the header has 2"):
        load_corpus(ragged)


def test_detection_errors(tmp_path: Path) -> None:
    with pytest.raises(CorpusFormatError, match="no such file"):
        load_corpus(tmp_path / "missing.json")
    txt = tmp_path / "notes.txt"
    txt.write_text("hello", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match="cannot detect.*hipporag"):
        load_corpus(txt)
    with pytest.raises(CorpusFormatError, match="unrecognised corpus records"):
        load_corpus(_write_json(tmp_path / "x.json", [{"name": "A"}]))
    with pytest.raises(CorpusFormatError, match="empty"):
        load_corpus(_write_json(tmp_path / "empty.json", []))
    with pytest.raises(CorpusFormatError, match="not a question file"):
        load_questions(_write_json(tmp_path / "docs.json", [{"title": "A", "text": "alpha"}]))


def test_format_registry_lists_valid_names() -> None:
    for name in ["hipporag", "jsonl", "flashrag", "csv", "hotpotqa-corpus", "openie", "musique", "hotpotqa", "popqa", "table-csv", "table-json"]:
        assert name in CORPUS_FORMATS
    assert set(QUESTION_FORMATS.names()) == {"qa", "musique", "hotpotqa", "realroute", "popqa", "r1router-steps", "searchr1-parquet"}
    with pytest.raises(UnknownNameError, match="valid: .*flashrag.*hipporag"):
        CORPUS_FORMATS.get("parquet")


def test_iter_documents_streams(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "c.jsonl", [{"text": f"t{i}"} for i in range(5)])
    stream = iter_documents(path)
    assert next(stream).text == "t0"  # nothing else has been read into documents yet
    assert [d.text for d in stream] == ["t1", "t2", "t3", "t4"]


# ---------------------------------------------------------------------------------------------
# the streaming JSON reader against the standard library, at every chunk boundary

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(values=st.lists(_json_values, max_size=6), chunk=st.integers(min_value=1, max_value=9), indent=st.sampled_from([None, 1]))
def test_streaming_json_matches_json_loads(tmp_path_factory, values, chunk, indent) -> None:
    path = tmp_path_factory.mktemp("s") / "v.json"
    path.write_text(json.dumps(values, indent=indent, ensure_ascii=False), encoding="utf-8")
    original = readers.CHUNK_CHARS
    readers.CHUNK_CHARS = chunk
    try:
        parsed = [v for _, v in iter_json(path)]
        keyed = {where.key: v for where, v in iter_json(_write_json(path.with_name("o.json"), {str(i): v for i, v in enumerate(values)}))}
    finally:
        readers.CHUNK_CHARS = original
    assert parsed == values
    assert keyed == {str(i): v for i, v in enumerate(values)}


@pytest.mark.parametrize("chunk", [1, 3, 1 << 20])
def test_every_truncation_is_a_format_error(tmp_path: Path, chunk: int, monkeypatch) -> None:
    monkeypatch.setattr(readers, "CHUNK_CHARS", chunk)
    text = json.dumps([{"title": "Café", "text": 'a\\"b é \U0001F600', "n": -12.5e3, "ok": True, "z": None}, [1, 2.0], 7], ensure_ascii=False)
    path = tmp_path / "cut.json"
    for cut in range(len(text)):
        path.write_text(text[:cut], encoding="utf-8")
        with pytest.raises(CorpusFormatError):
            list(iter_json(path))


def test_streaming_reports_lines(tmp_path: Path) -> None:
    path = tmp_path / "v.json"
    path.write_text('[\n  {"a": 1},\n  {"a": 2},\n\n  {"a": 3}\n]', encoding="utf-8")
    assert [(w.record, w.line) for w, _ in iter_json(path)] == [(0, 2), (1, 3), (2, 5)]


def test_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps([{"title": "A", "text": "alpha"}]).encode())
    assert load_corpus(path).docs[0].text == "alpha"


# ---------------------------------------------------------------------------------------------
# tables


def test_table_linearisation() -> None:
    table = Table(title="Capitals", header=["Country", "Capital", "Note"], rows=[["France", "Paris", ""], ["Japan", "Tokyo", "since 1869"]])
    assert linearize_row(table, table.rows[0]) == "Title: Capitals | Country: France | Capital: Paris"
    docs = table_documents(table)
    assert [d.text for d in docs][1] == "Title: Capitals | Country: Japan | Capital: Tokyo | Note: since 1869"
    assert docs[0].title == "Capitals" and docs[0].metadata["row_start"] == 0 and docs[0].metadata["kind"] == "table"
    (group,) = table_documents(table, rows_per_doc=5, source="table")
    assert group.text.count("\n") == 1 and group.source == "table" and group.metadata["row_end"] == 2
    assert linearize_r1router(table).startswith("[Title]Capitals[Header]Country[sep]Capital[sep]Note[Rows][Row]France[sep]Paris")
    with pytest.raises(ValueError, match="row 0 has 1 cells"):
        Table(title="T", header=["a", "b"], rows=[["x"]])


def test_table_files(tmp_path: Path) -> None:
    csv_path = tmp_path / "olympic_hosts.csv"
    csv_path.write_text("Year,City\n1896,Athens\n1900,Paris\n", encoding="utf-8")
    table = load_table_csv(csv_path)
    assert (table.title, table.table_id, table.rows[1]) == ("Olympic hosts", "olympic_hosts", ["1900", "Paris"])
    docs, report = load_corpus(csv_path, "table-csv")
    assert report.loaded == 2 and docs[0].text == "Title: Olympic hosts | Year: 1896 | City: Athens"
    one = {"title": "T", "header": ["a"], "rows": [[1], [2.5]]}
    assert load_tables_json(_write_json(tmp_path / "one.json", one))[0].rows == [["1"], ["2.5"]]
    assert len(load_tables_json(_write_json(tmp_path / "many.json", {"tables": [one, one]}))) == 2
    listed = _write_json(tmp_path / "list.json", [one])
    assert detect_corpus_format(listed) == "table-json" and len(load_corpus(listed).docs) == 2
    with pytest.raises(CorpusFormatError, match="record 1.*header"):
        load_tables_json(_write_json(tmp_path / "bad.json", [one, {"title": "U", "rows": []}]))


def test_bundled_tables() -> None:
    tables = load_bundled_tables()
    assert len(tables) == 5 and sum(len(t.rows) for t in tables) == 115
    assert all(t.source and t.table_id for t in tables)
    texts = [linearize_row(t, row) for t in tables for row in t.rows]
    assert "Title: Summer Olympic Games | Year: 1952 | Edition: XV | Host city: Helsinki | Host country: Finland" in texts


# ---------------------------------------------------------------------------------------------
# sampling


def test_evenly_spaced() -> None:
    assert evenly_spaced_indices(10, 4) == [0, 2, 5, 7]
    assert evenly_spaced(list("abcdef"), 3) == ["a", "c", "e"]
    assert evenly_spaced([1, 2], 5) == [1, 2] and evenly_spaced([1, 2], None) == [1, 2]
    assert evenly_spaced([1, 2, 3], 0) == []
    picks = evenly_spaced_indices(1000, 7)
    assert len(set(picks)) == 7 and picks == sorted(picks) and picks[0] == 0 and picks[-1] < 1000
    with pytest.raises(ValueError):
        evenly_spaced([1], -1)


def test_document_factory_round_trip() -> None:
    doc = Document.make("T", "x")
    assert doc.doc_id == doc_id_for("T", "x")
