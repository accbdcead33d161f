"""Synthesised grounded step-wise R1-Router trajectories (``routerag golden-steps``): the released
trajectories' format, the grounding check of each hop, the stored set and its statistics."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest
from typer.testing import CliRunner

from routerag.cli.app import app
from routerag.cli.main import _load
from routerag.corpus.datasets import Dataset, register_dataset
from routerag.corpus.schema import Document, Question, SubQuestion
from routerag.strategies.prompts import (
    R1_ROUTER_FINAL_SYSTEM,
    R1_ROUTER_GUIDELINES,
    R1_ROUTER_STEP_ANSWER_SYSTEM,
    r1_router_history,
    r1_router_ret_system,
)
from routerag.trace import Hit
from routerag.train.fixtures import bm25_sourceset
from routerag.train.golden.r1router import r1_router_gold_completion, record_step_rows
from routerag.train.golden.r1router_synth import (
    STEP_SOURCES,
    RoutedHop,
    Synthesised,
    clean_sub_question,
    musique_trajectories,
    trajectory_record,
    wtq_trajectories,
)
from routerag.train.golden_steps import STATS_FILE, STEPS_FILE, TRAJECTORIES_FILE, build_step_set, read_step_rows

TABLES = {
    "medals": [Document.make("2008 Summer Olympics medal table", "Nation | Gold | Silver\nChina | 48 | 22\nUnited States | 36 | 39"),
               Document.make("2008 Summer Olympics medal table", "Nation | Gold | Silver\nRussia | 24 | 13\nBritain | 19 | 13")],
    "albums": [Document.make("Adele discography", "Album | Year | Peak\n19 | 2008 | 1\n21 | 2011 | 1\n25 | 2015 | 1")],
    "stations": [Document.make("Railway stations in Kent", "Station | Opened | Platforms\nAshford | 1842 | 6\nDover | 1844 | 3")],
}


def _table_search(tmp_path: Path, k: int):
    sources = bm25_sourceset({"tables": [d for docs in TABLES.values() for d in docs]}, tmp_path)

    def search(queries: Sequence[str]) -> list[list[Hit]]:
        return [list(r.hits) for r in sources.search(list(queries), k, ["tables"]).results["tables"]]

    return search


def _wtq(qid: str, text: str, table: str, answers: list[str]) -> Question:
    return Question(qid=qid, question=text, answers=answers, dataset="wtq-train", answer_scheme="wtq",
                    supporting_doc_ids=[d.doc_id for d in TABLES[table]], metadata={"table_id": table})


def test_a_record_holds_the_strategy_prompts_and_gives_the_released_row_format() -> None:
    q = Question(qid="q1", question="Who directed Alien and when was he born?", answers=["30 November 1937"])
    hit = Hit(doc_id="d1", title="Alien (film)", text="Alien is directed by Ridley Scott.", score=1.0, source="row",
              mode="bm25", rank=1)
    hops = [RoutedHop(query="Who directed Alien?", retriever="Text Retriever", answer="Ridley Scott", evidence=[hit]),
            RoutedHop(query="When was Ridley Scott born?", retriever="Text Retriever", answer="30 November 1937")]
    record = trajectory_record("musique:q1", "musique", q, hops, q.answers)
    assert record["id"] == "musique:q1" and record["images"] == [] and len(record["steps"]) == 6
    steps = record["steps"]
    assert [s["step_type"] for s in steps] == ["ret", "ans", "ret", "ans", "ret", "ans"]
    assert steps[0]["system"] == r1_router_ret_system(R1_ROUTER_GUIDELINES)
    # earlier sub-questions and answers as the strategy shows the gold outputs: each on its own line
    assert steps[2]["problem"] == r1_router_history(q.question, [("\nWho directed Alien?\n", "\nRidley Scott\n")])
    assert steps[1]["system"] == R1_ROUTER_STEP_ANSWER_SYSTEM and steps[5]["system"] == R1_ROUTER_FINAL_SYSTEM
    assert "ter-0: Alien (film) Alien is directed by Ridley Scott." in steps[1]["problem"]
    assert steps[1]["problem"].endswith("Question: \nWho directed Alien?\n")
    assert steps[4]["answer"] == {"query": "none", "retriever": ["none"]}
    rows = record_step_rows(record, record["id"])
    extras = [json.loads(r["step"]) for r in rows]
    assert extras[0] == {"step_type": "ret", "gold_query": "Who directed Alien?", "gold_retriever": "text retriever"}
    assert [e["step_type"] for e in extras] == ["ret", "ans", "ret", "ans", "ret", "final"]
    assert extras[3]["gold_answer"] == "30 November 1937" and rows[5]["answers"] == ["30 November 1937"]
    assert all(r["trajectory"] == "musique:q1" and [m["role"] for m in r["prompt"]] == ["system", "user"] for r in rows)
    # the SFT recipe's gold outputs: a route, a stop, an answer
    assert "<ret>\nText Retriever\n</ret>" in r1_router_gold_completion(extras[0])
    assert "<sub-question>\nNone\n</sub-question>" in r1_router_gold_completion(extras[4])
    assert "<answer>\n30 November 1937\n</answer>" in r1_router_gold_completion(extras[5])
    with pytest.raises(ValueError):
        trajectory_record("x", "x", q, [hops[0].model_copy(update={"retriever": "Graph Retriever"})], q.answers)


def test_wtq_trajectories_keep_a_question_only_when_its_own_table_comes_back(tmp_path: Path) -> None:
    questions = [_wtq("nt-1", "how many gold medals did china win at the 2008 summer olympics?", "medals", ["48"]),
                 _wtq("nt-2", "which adele albums peaked at 1?", "albums", ["19", "21", "25"]),
                 _wtq("nt-3", "what opened first, ashford or dover?", "medals", ["Ashford"]),  # not its table's words
                 _wtq("nt-4", "which station has the most platforms?", "stations", [])]
    out = wtq_trajectories(questions, _table_search(tmp_path, k=1))
    assert [o.qid for o in out] == ["nt-1", "nt-2", "nt-3", "nt-4"]
    assert [o.dropped for o in out] == [None, None, "table_not_retrieved", "no_answer"]
    assert out[2].failed_hop == 1 and out[2].record is None
    medals = out[0].record
    assert medals is not None and medals["id"] == "wtq-train:nt-1"
    ret, ans = medals["steps"][0], medals["steps"][1]
    assert ret["answer"] == {"query": questions[0].question, "retriever": ["table retriever"]}
    assert "tar-0: 2008 Summer Olympics medal table" in ans["problem"] and ans["answer"] == "48"
    # a list answer is one answer string, its items joined (the wtq scheme splits it again)
    albums = out[1].record
    assert albums is not None and albums["steps"][-1]["answer"] == ["19, 21, 25"]
    assert [s["step_type"] for s in albums["steps"]] == ["ret", "ans", "ret", "ans"]


def _musique_row() -> tuple[Question, list[Document]]:
    paragraphs = [
        Document.make("Journal of Psychotherapy Integration", "The Journal of Psychotherapy Integration is published by "
                      "the American Psychological Association."),
        Document.make("American Psychological Association", "G. Stanley Hall was the first president of the American "
                      "Psychological Association, founded in 1892."),
        Document.make("Peter Bonetti", "Peter Bonetti is a former goalkeeper who played for Chelsea."),
        Document.make("Psychology", "Psychology is the study of mind and behaviour."),
    ]
    q = Question(qid="2hop__1_2", question="Who was the first president of the association which published Journal of "
                 "Psychotherapy Integration?", answers=["G. Stanley Hall", "Stanley Hall"], dataset="musique",
                 decomposition=[
                     SubQuestion(question="What company published Journal of Psychotherapy Integration?",
                                 answer="American Psychological Association", supporting_doc_ids=[paragraphs[0].doc_id]),
                     SubQuestion(question="Who was the first president of #1 ?", answer="G. Stanley Hall",
                                 supporting_doc_ids=[paragraphs[1].doc_id])],
                 metadata={"answerable": True})
    return q, paragraphs


def test_musique_trajectories_ground_every_hop_in_the_rows_own_paragraphs() -> None:
    q, paragraphs = _musique_row()
    (kept,) = musique_trajectories([q], {q.qid: paragraphs}, k=1)
    assert kept.dropped is None and kept.record is not None and kept.record["answers"] == q.answers
    rets = [s["answer"] for s in kept.record["steps"] if s["step_type"] == "ret"]
    assert rets == [{"query": "What company published Journal of Psychotherapy Integration?", "retriever": ["text retriever"]},
                    {"query": "Who was the first president of American Psychological Association?",
                     "retriever": ["text retriever"]},
                    {"query": "none", "retriever": ["none"]}]
    assert kept.record["steps"][-1]["answer"] == ["G. Stanley Hall", "Stanley Hall"]
    assert "G. Stanley Hall was the first president" in kept.record["steps"][3]["problem"]
    # the second hop's support replaced by a paragraph the sub-question does not find at k = 1
    miss = q.model_copy(update={"qid": "miss", "decomposition": [
        q.decomposition[0], q.decomposition[1].model_copy(update={"supporting_doc_ids": [paragraphs[3].doc_id]})]})
    unanswerable = q.model_copy(update={"qid": "u", "metadata": {"answerable": False}})
    flat = q.model_copy(update={"qid": "flat", "decomposition": []})
    lost = q.model_copy(update={"qid": "lost", "decomposition": [
        q.decomposition[0].model_copy(update={"supporting_doc_ids": ["elsewhere"]})]})
    out = musique_trajectories([miss, unanswerable, flat, lost, q.model_copy(update={"qid": "alone"})],
                               {"miss": paragraphs, "u": paragraphs, "flat": paragraphs, "lost": paragraphs}, k=1)
    assert [(o.dropped, o.failed_hop) for o in out] == [("support_not_retrieved", 2), ("unanswerable", None),
                                                        ("no_decomposition", None), ("missing_support", None),
                                                        ("no_paragraphs", None)]


def test_sub_questions_are_cleaned_as_the_strategy_searches_them() -> None:
    assert clean_sub_question("Peter Bonetti >> member of sports team", "q") == "What is the member of sports team of Peter Bonetti?"
    assert clean_sub_question("who scored Chelsea 's first goal ?", "q") == "who scored Chelsea's first goal?"
    assert clean_sub_question("  ", "the question") == "the question"


class _FixtureSteps:
    """A registered step source over the fixture tables (what a plugin source looks like)."""

    name: ClassVar[str] = "fixture-tables"
    calls: ClassVar[list[int]] = []
    search_dir: ClassVar[Path | None] = None

    def questions(self) -> list[Question]:
        return [_wtq("nt-1", "how many gold medals did china win at the 2008 summer olympics?", "medals", ["48"]),
                _wtq("nt-2", "which adele albums peaked at 1?", "albums", ["19", "21", "25"]),
                _wtq("nt-3", "what opened first, ashford or dover?", "medals", ["Ashford"]),
                _wtq("nt-5", "when did dover station open?", "stations", ["1844"])]

    def synthesise(self, questions: Sequence[Question], k: int) -> list[Synthesised]:
        assert self.search_dir is not None
        self.calls.append(len(questions))
        return wtq_trajectories(questions, _table_search(self.search_dir / str(len(self.calls)), k), source=self.name)


@pytest.fixture
def fixture_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> type[_FixtureSteps]:
    monkeypatch.setitem(STEP_SOURCES._entries, _FixtureSteps.name, _FixtureSteps)  # as register would; undone after
    monkeypatch.setattr(_FixtureSteps, "calls", [])
    monkeypatch.setattr(_FixtureSteps, "search_dir", tmp_path / "indexes")
    held_out = _FixtureSteps().questions()[3]
    register_dataset("golden-steps-fixture-eval", lambda: Dataset(name="golden-steps-fixture-eval", questions=[held_out]),
                     replace=True)
    return _FixtureSteps


def test_a_step_set_is_written_with_its_statistics_and_resumed(fixture_source: type[_FixtureSteps], tmp_path: Path) -> None:
    out = tmp_path / "steps"
    stats = build_step_set(["fixture-tables:3"], out, eval_sets=["golden-steps-fixture-eval"], k=1, command="test")
    s = stats.by_source["fixture-tables"]
    # nt-5 is an evaluation question: dropped at load, before the 3 evenly spaced of the rest are taken
    assert (s.questions, s.eval_overlap, s.considered, s.kept) == (4, 1, 3, 2)
    assert s.dropped == {"table_not_retrieved": 1} and s.failed_hop == {1: 1} and s.hops == {1: 2}
    assert s.steps == {"ret": 4, "ans": 2, "final": 2} and stats.steps_by_kind == s.steps and stats.steps == 8
    assert stats.routes == {"table retriever": 2, "none": 2}
    assert stats.overlap_checked is not None and stats.overlap_checked["overlapping"] == []
    records = [json.loads(line) for line in (out / TRAJECTORIES_FILE).read_text().splitlines()]
    assert [r["id"] for r in records] == ["fixture-tables:nt-1", "fixture-tables:nt-2"]
    rows = read_step_rows(out)
    assert rows == read_step_rows(out / STEPS_FILE) and len(rows) == 8
    assert rows == [row for r in records for row in record_step_rows(r, r["id"])]
    assert json.loads((out / STATS_FILE).read_text())["by_source"]["fixture-tables"]["kept"] == 2
    # a second run with the same settings reads the finished source back (same files), new settings synthesise
    before = {name: (out / name).read_text() for name in (TRAJECTORIES_FILE, STEPS_FILE)}
    again = build_step_set(["fixture-tables:3"], out, eval_sets=["golden-steps-fixture-eval"], k=1, command="test")
    assert again.by_source["fixture-tables"].reused and fixture_source.calls == [3]
    assert before == {name: (out / name).read_text() for name in (TRAJECTORIES_FILE, STEPS_FILE)}
    wider = build_step_set(["fixture-tables:3"], out, eval_sets=["golden-steps-fixture-eval"], k=3)
    assert not wider.by_source["fixture-tables"].reused and fixture_source.calls == [3, 3]
    assert wider.by_source["fixture-tables"].kept == 2  # its words are in no medal table: BM25 scores it 0 there
    with pytest.raises(ValueError, match="unknown step source"):
        build_step_set(["hotpotqa"], out, eval_sets=[])
    with pytest.raises(ValueError, match="NAME:N"):
        build_step_set(["fixture-tables:many"], out, eval_sets=[])


def test_the_golden_steps_command(fixture_source: type[_FixtureSteps], tmp_path: Path) -> None:
    _load()
    runner = CliRunner()
    out = tmp_path / "cli"
    result = runner.invoke(app, ["golden-steps", "--out", str(out), "--source", "fixture-tables",
                                 "--exclude", "golden-steps-fixture-eval", "--k", "1"])
    assert result.exit_code == 0, result.output
    assert "wrote 2 trajectories, 8 step rows" in result.output
    assert "fixture-tables: 2 of 3 kept (1 of 4 dropped as evaluation overlap first); dropped: 1 table_not_retrieved" in result.output
    assert json.loads((out / STATS_FILE).read_text())["command"].startswith("routerag ")
    bad = runner.invoke(app, ["golden-steps", "--out", str(out), "--source", "2wiki", "--exclude", "golden-steps-fixture-eval"])
    assert bad.exit_code != 0 and "unknown step source '2wiki'" in bad.output


@pytest.mark.data
def test_real_wtq_and_musique_training_questions(shared: Path, tmp_path: Path) -> None:
    """~20 real training questions: WikiTableQuestions over its cached BM25 index, MuSiQue over each
    question's own paragraphs; the 50 evaluated MuSiQue questions never appear."""
    from routerag.corpus.datasets import load_dataset

    stats = build_step_set(["wtq-train:10", "musique:10"], tmp_path, eval_sets=["musique:50", "wtq"])
    wtq, musique = stats.by_source["wtq-train"], stats.by_source["musique"]
    assert wtq.considered == musique.considered == 10 and wtq.kept > 0 and musique.kept > 0
    assert musique.eval_overlap >= 50 and wtq.kept + sum(wtq.dropped.values()) == 10
    assert set(wtq.dropped) <= {"table_not_retrieved", "no_answer"}
    assert set(musique.hops) <= {2, 3, 4} and wtq.hops == {1: wtq.kept}
    assert stats.routes["table retriever"] == wtq.kept and stats.routes["none"] == stats.trajectories
    evaluated = {q.qid for q in load_dataset("musique").sample(50).questions}
    wtq_data = load_dataset("wtq-train")
    tables, docs = {q.qid: q for q in wtq_data.questions}, {d.doc_id: d for d in wtq_data.corpus}
    for record in (json.loads(line) for line in (tmp_path / TRAJECTORIES_FILE).read_text().splitlines()):
        source, qid = record["id"].split(":", 1)
        assert qid not in evaluated
        if source == "wtq-train":  # a part of the question's own table is in the Table Retriever step's evidence
            own = tables[qid]
            evidence = record["steps"][1]["problem"]
            assert record["question"] == own.question
            assert any(docs[i].text[:80] in evidence for i in own.supporting_doc_ids)
    rows = read_step_rows(tmp_path)
    assert len(rows) == stats.steps and {json.loads(r["step"])["step_type"] for r in rows} == {"ret", "ans", "final"}


def test_the_synthesised_evidence_is_what_the_strategy_shows(tmp_path: Path) -> None:
    """An episode of the r1-router strategy offering the released three knowledge bases, its model
    writing the gold outputs, sends exactly the prompts of the synthesised trajectory: the same k
    (the strategy's default), every hit's whole text (neither cuts a long table), the earlier
    sub-questions and answers as the model wrote them."""
    from routerag.llm.scripted import ScriptedModel
    from routerag.runtime.base import StrategyContext
    from routerag.strategies.r1_router import R1Router, R1RouterParams
    from routerag.train.golden_steps import DEFAULT_K

    assert DEFAULT_K == R1RouterParams().k
    rows = "\n".join(f"Nation {i} | {i} | {i + 1}" for i in range(300))
    long_table = Document.make("2008 Summer Olympics medal table", "Nation | Gold | Silver\n" + rows)
    assert len(long_table.text) > 4000
    others = [Document.make(f"Winter Olympics of {year}", f"City | Year\n{city} | {year}")
              for city, year in (("Oslo", 1952), ("Sapporo", 1972), ("Calgary", 1988), ("Nagano", 1998), ("Turin", 2006))]
    docs = [long_table, *others, *TABLES["albums"]]
    sources = bm25_sourceset({"table": docs, "text": [Document.make("x", "nothing")],
                              "image": [Document.make("y", "nothing")]}, tmp_path / "idx")
    q = Question(qid="nt-1", question="how many gold medals did nation 7 win at the 2008 summer olympics?", answers=["7"],
                 supporting_doc_ids=[long_table.doc_id])

    def search(queries: Sequence[str]) -> list[list[Hit]]:
        return [list(r.hits) for r in sources.search(list(queries), DEFAULT_K, ["table"]).results["table"]]

    (made,) = wtq_trajectories([q], search)
    assert made.record is not None
    extras = [json.loads(r["step"]) for r in record_step_rows(made.record, "t")]
    model = ScriptedModel([r1_router_gold_completion(e) for e in extras])
    params = R1RouterParams(retrievers={"Text Retriever": "text", "Text Image Retriever": "image", "Table Retriever": "table"})
    trace = R1Router(StrategyContext(model=model, sources=sources), params).run(q.question)
    assert trace.error is None and trace.answer == "7"
    sent = [(c.messages[0].content, c.messages[1].content) for c in model.calls]
    assert sent == [(s["system"], s["problem"]) for s in made.record["steps"]]
    assert long_table.text in sent[1][1] and sent[1][1].count("\ntar-") == DEFAULT_K - 1  # tar-0 follows the legend's colon


def test_trajectory_ids_sort_with_their_numbers_as_numbers() -> None:
    from routerag.train.golden.r1router import trajectory_order

    ids = ["wtq-train:nt-10", "r1router-10", "musique:2hop__13_10", "r1router-9", "wtq-train:nt-9", "musique:2hop__13_4",
           "r1router-100", "x-1", "x-01"]
    order = ["musique:2hop__13_4", "musique:2hop__13_10", "r1router-9", "r1router-10", "r1router-100", "wtq-train:nt-9",
             "wtq-train:nt-10", "x-01", "x-1"]
    assert sorted(ids, key=trajectory_order) == order
    assert sorted(reversed(ids), key=trajectory_order) == order  # a total order: the input order does not matter


# ------------------------------------------------------------------------------ training on step sets


def _released_file(root: Path, monkeypatch: pytest.MonkeyPatch, heldout: Question | None = None) -> list[dict]:
    """Seven released-format trajectories as the shared data's R1-Router file (``r1router-6`` is on
    the held-out side of the stored split, 0-5 on the train side); ``heldout``: line 6's question."""
    from routerag.corpus.r1router_split import split_ids

    assert "r1router-6" in split_ids("heldout") and not {f"r1router-{i}" for i in range(6)} & set(split_ids("heldout"))
    hit = Hit(doc_id="d", title="Alien (film)", text="Alien is directed by Ridley Scott.", score=1.0, source="row",
              mode="bm25", rank=1)
    records = []
    for i in range(7):
        q = heldout if (i == 6 and heldout is not None) else Question(qid=f"r{i}", question=f"Who directed film number {i}?",
                                                                      answers=[f"Director {i}"])
        hop = RoutedHop(query=q.question, retriever="Text Retriever", answer=q.answers[0], evidence=[hit])
        records.append({k: v for k, v in trajectory_record(f"r{i}", "r1router", q, [hop], q.answers).items()
                        if k in ("images", "steps")})
    (root / "r1router").mkdir(parents=True, exist_ok=True)
    (root / "r1router" / "stepgrpo_valid.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    monkeypatch.setenv("ROUTERAG_DATA_DIR", str(root))
    return records


def _step_set(tmp_path: Path) -> Path:
    out = tmp_path / "steps"
    build_step_set(["fixture-tables:3"], out, eval_sets=["golden-steps-fixture-eval"], k=1)
    return out


def test_step_sets_add_training_rows_beside_the_released_split(fixture_source: type[_FixtureSteps], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from routerag.train.golden_steps import r1_router_training_steps

    released = _released_file(tmp_path / "data", monkeypatch)
    steps = _step_set(tmp_path)
    alone = r1_router_training_steps("train", [], ["golden-steps-fixture-eval"])
    assert {r["trajectory"] for r in alone.rows} == {f"r1router-{i}" for i in range(6)} and not alone.note
    both = r1_router_training_steps("train", [steps], ["golden-steps-fixture-eval"])
    assert both.rows[: len(alone.rows)] == alone.rows  # the released rows first, unchanged
    synthesised = both.rows[len(alone.rows):]
    assert synthesised == read_step_rows(steps) and len(synthesised) == 8
    assert both.origin == {**{f"r1router-{i}": "released" for i in range(6)},
                           "fixture-tables:nt-1": str(steps), "fixture-tables:nt-2": str(steps)}
    assert both.note["golden_steps"] == {str(steps): {"trajectories": 2, "rows": 8, "by_step_type": {"ret": 4, "ans": 2, "final": 2}}}
    checked = both.note["overlap_checked"]
    assert checked["overlapping"] == [] and checked["n_train"] == 2 and checked["heldout_trajectories"] == 1
    assert checked["n_eval"] == 2  # the fixture evaluation set's question and the held-out trajectory
    # all released trajectories (trajectories: all): the held-out one is trained on, so it is no check
    every = r1_router_training_steps(None, [steps / TRAJECTORIES_FILE], ["golden-steps-fixture-eval"])
    assert len(every.rows) == len(alone.rows) + 4 + 8 and every.note["overlap_checked"]["heldout_trajectories"] == 0
    assert len(released) == 7


def test_a_step_set_overlapping_an_evaluation_question_is_refused(fixture_source: type[_FixtureSteps], tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from routerag.train.golden_steps import r1_router_training_steps

    steps = _step_set(tmp_path)
    kept = fixture_source().questions()[0]  # nt-1: in the step set
    # the run evaluates on a set holding nt-1 (the step set was built against another)
    register_dataset("golden-steps-fixture-eval-2", lambda: Dataset(name="golden-steps-fixture-eval-2", questions=[
        kept.model_copy(update={"qid": "other-id"})]), replace=True)
    _released_file(tmp_path / "data", monkeypatch)
    with pytest.raises(ValueError, match=r"1 synthesised trajectories overlap .* nt-1: question\+answer"):
        r1_router_training_steps("train", [steps], ["golden-steps-fixture-eval-2"])
    # a held-out released trajectory asks nt-1's question: refused on the train side
    _released_file(tmp_path / "data2", monkeypatch, heldout=kept)
    with pytest.raises(ValueError, match="or the released held-out trajectories"):
        r1_router_training_steps("train", [steps], ["golden-steps-fixture-eval"])
    assert len(r1_router_training_steps(None, [steps], ["golden-steps-fixture-eval"]).rows) > 8
    # a trajectory twice, a folder without a step set
    with pytest.raises(ValueError, match="fixture-tables:nt-1 of step set .* is in step set"):
        r1_router_training_steps("train", [steps, steps / TRAJECTORIES_FILE], ["golden-steps-fixture-eval"])
    with pytest.raises(FileNotFoundError, match="no step set"):
        r1_router_training_steps("train", [tmp_path / "nowhere"], ["golden-steps-fixture-eval"])


def test_the_golden_steps_setting_of_the_r1_router_recipes() -> None:
    from routerag.config import ConfigError
    from routerag.train.config import R1RouterSFTConfig, R1RouterStepConfig, train_config

    for recipe in ("r1-router-sft", "r1-router-step"):
        cfg = train_config({"recipe": recipe, "golden_steps": ["runs/golden-steps/x"], "data": {"eval_sets": ["wtq"]}})
        assert isinstance(cfg, (R1RouterSFTConfig, R1RouterStepConfig)) and cfg.golden_steps == ["runs/golden-steps/x"]
        assert train_config({"recipe": recipe}).golden_steps == []  # type: ignore[attr-defined]
        with pytest.raises(ConfigError, match="golden_steps: name the evaluation sets"):
            train_config({"recipe": recipe, "golden_steps": ["a"], "data": {"eval_sets": []}})
        with pytest.raises(ConfigError, match="named twice"):
            train_config({"recipe": recipe, "golden_steps": ["a", "a"], "data": {"eval_sets": ["wtq"]}})
    with pytest.raises(ConfigError, match="not a setting of recipe routerag-sft"):
        train_config({"recipe": "routerag-sft", "golden_steps": ["a"]})


def test_the_sft_rows_of_released_and_synthesised_steps(fixture_source: type[_FixtureSteps], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch, tokenizer) -> None:
    from routerag.train.config import R1RouterSFTConfig, R1RouterStepConfig
    from routerag.train.env import HFCodec
    from routerag.train.recipes import r1_router_sft_rows, r1_router_step_prompts

    _released_file(tmp_path / "data", monkeypatch)
    steps = _step_set(tmp_path)
    cfg = R1RouterSFTConfig(model={"name": "tiny"}, data={"eval_sets": ["golden-steps-fixture-eval"]}, golden_steps=[str(steps)],
                            sft={"enabled": True, "max_length": 1024, "drop_longer": True}, max_per_type={"final": 4})
    rows, notes = r1_router_sft_rows(cfg, HFCodec(tokenizer))
    assert notes["by_step_type"] == {"ret": 12 + 4, "ans": 6 + 2, "final": 4} and len(rows) == 28
    # 4 of the 8 final answers evenly spaced over the released ones, then the synthesised ones
    assert notes["by_origin"] == {"released": {"ret": 12, "ans": 6, "final": 3}, str(steps): {"ret": 4, "ans": 2, "final": 1}}
    assert notes["routes_by_origin"] == {"released": {"text retriever": 6, "none": 6},
                                         str(steps): {"table retriever": 2, "none": 2}}
    assert notes["dropped_longer"] == 0 and notes["golden_steps"][str(steps)]["trajectories"] == 2
    assert notes["trajectory_ids"] == ["fixture-tables:nt-1", "fixture-tables:nt-2", *(f"r1router-{i}" for i in range(6))]
    assert notes["overlap_checked"]["overlapping"] == []
    # Step-GRPO reads the same rows
    step = R1RouterStepConfig(model={"name": "tiny"}, data={"eval_sets": ["golden-steps-fixture-eval"]},
                              golden_steps=[str(steps)], step_types=["ret"])
    prompts = r1_router_step_prompts(step)
    assert len(prompts) == 16 and "trajectory" not in prompts[0]
    assert sum("table retriever" in p["step"] for p in prompts) == 2
