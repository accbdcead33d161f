"""``routerag routing-report``: every choice's recall@k, ms and evidence tokens on a tiny real
index (two BM25 sources over a handful of documents), the oracle, the best fixed choice, retrieving
from all, the routers, resumption, the refusals, the JSON and the Markdown; and once over a slice
of the bundled data (no benchmark folder needed)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from routerag.api.routing_report import (
    JSON_NAME,
    MARKDOWN_NAME,
    PLOT_NAME,
    KeywordSettings,
    LearnedSettings,
    RoutingReportError,
    RoutingReportParams,
    routing_report,
)
from routerag.cli.app import app
from routerag.cli.main import _load
from routerag.routing.base import RoutingError
from routerag.train.router.fit import grouped_folds
from routerag.train.router.keyword_fit import cross_validated_choices, fit_rules, words
from routerag.train.router.outcomes import OUTCOMES_NAME, ChoiceOutcome, QuestionOutcome
from routerag.train.router.report import RoutingReport

_load()  # every command registered, as `routerag` runs
runner = CliRunner()

CAPITALS = [("France", "Paris"), ("Germany", "Berlin"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Peru", "Lima")]
DRUGS = [("diabetes", "Insulin"), ("headaches", "Aspirin"), ("bacterial infections", "Penicillin")]


class Words:
    """A toy embedder for the profile router: counts of place and medicine words."""

    identity = "words"
    dim = 2

    def encode(self, texts, *, is_query=False):
        rows = [[sum(t.lower().count(w) for w in ("capital", "passages")), t.lower().count("treat")] for t in texts]
        return np.asarray(rows, dtype=np.float32) + 1e-3


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    import routerag.index.embedder as embedder_module

    monkeypatch.setenv("ROUTERAG_HOME", str(tmp_path / "home"))  # the cached indexes
    monkeypatch.setattr(embedder_module, "build_embedder", lambda config=None: Words())


def write_realroute(folder: Path, local: list[dict], other: list[dict], questions: list[dict], prefix: str = "toy") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{prefix}_corpus_local.json").write_text(json.dumps(local))
    (folder / f"{prefix}_corpus_global.json").write_text(json.dumps(other))
    if questions:
        (folder / f"{prefix}_qa.json").write_text(json.dumps(questions))
    return folder


@pytest.fixture
def toy(tmp_path) -> Path:
    """Two sources: ``local`` holds the capitals, ``global`` the medicines; 5 + 3 questions."""
    local = [{"title": city, "text": f"{city} is the capital of {country}."} for country, city in CAPITALS]
    other = [{"title": drug, "text": f"{drug} treats {illness}."} for illness, drug in DRUGS]
    questions = [{"_id": f"c{i}", "type": "singlehop_local", "question": f"What is the capital of {country}?", "answer": city,
                  "context": []} for i, (country, city) in enumerate(CAPITALS)]
    questions += [{"_id": f"d{i}", "type": "singlehop_global", "question": f"What treats {illness}?", "answer": drug,
                   "context": []} for i, (illness, drug) in enumerate(DRUGS)]
    return write_realroute(tmp_path / "toy", local, other, questions)


def params(dataset: Path | str, out: Path, **kw) -> RoutingReportParams:
    kw.setdefault("learned", LearnedSettings(folds=2, inputs="features"))
    kw.setdefault("keyword", KeywordSettings(folds=2, min_support=1))
    return RoutingReportParams(dataset=f"file:{dataset}" if isinstance(dataset, Path) else dataset, out=out, k=1,
                               source_mode="bm25", resamples=200, **kw)


def rows(report: RoutingReport) -> dict:
    return {r.name: r for r in report.rows}


def test_the_oracle_bounds_every_choice_and_router_and_retrieve_all_pools_them(toy, tmp_path):
    made = routing_report(params(toy, tmp_path / "out", plot=False))
    report, by_name = made.report, rows(made.report)
    assert report.settings.choices == ["local", "global"] and report.questions == 8 and made.measured == 8
    assert by_name["local"].recall == 5 / 8 and by_name["global"].recall == 3 / 8
    assert report.best_fixed == "local" and report.headroom == pytest.approx(3 / 8)
    oracle = by_name["oracle"]
    assert oracle.recall == 1.0 and all(oracle.recall >= r.recall for r in report.rows)
    assert oracle.picks == {"local": 0.625, "global": 0.375}
    assert oracle.recovered.share == pytest.approx(1.0) and by_name["local"].recovered.share == 0.0
    every = by_name["retrieve all"]
    assert every.recall == 1.0
    assert every.tokens == pytest.approx(by_name["local"].tokens + by_name["global"].tokens)  # two corpora: no passage twice
    assert every.ms == pytest.approx(by_name["local"].ms + by_name["global"].ms, abs=0.01)
    assert every.cost_ratio > 1.0 and by_name["local"].cost_ratio == 1.0
    # the profile router reads "capital" / "treat" in the queries and the profiles of the sources
    assert by_name["profile-embedding"].kind == "router" and by_name["learned"].kind == "router"
    assert 0 <= by_name["learned"].recall <= 1 and sum(by_name["learned"].picks.values()) == pytest.approx(1.0)
    assert report.verdict.startswith("routing can add at most +37.5 recall@1 here over local (62.5); the learned router recovers")
    records = [QuestionOutcome.model_validate_json(line) for line in (tmp_path / "out" / OUTCOMES_NAME).read_text().splitlines()]
    first = records[0]
    assert first.question == "What is the capital of France?" and first.golds == ["Paris"]
    assert first.choices["local"].found and first.choices["local"].rank == 1 and not first.choices["global"].found
    assert first.choices["local"].tokens == 8  # "Paris" + "Paris is the capital of France ."


def test_a_rerun_measures_only_the_questions_not_done_and_other_settings_are_refused(toy, tmp_path, monkeypatch):
    out = tmp_path / "out"
    first = routing_report(params(toy, out, plot=False, limit=4))
    assert (first.measured, first.resumed) == (4, 0)
    log = out / OUTCOMES_NAME
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:-1]) + lines[-1][:25])  # a crash mid-write: the last record cut
    import routerag.train.router.outcomes as outcomes

    searched: list[str] = []
    measure = outcomes.measure

    def spy(sources, questions, *args, **kw):
        searched.extend(q.qid for _, q in questions)
        return measure(sources, questions, *args, **kw)

    monkeypatch.setattr(outcomes, "measure", spy)
    again = routing_report(params(toy, out, plot=False))  # the whole sample now: 3 kept, 5 to do
    assert (again.measured, again.resumed) == (5, 3) and len(searched) == 5
    assert len(log.read_text().splitlines()) == 8 and again.report.questions == 8
    assert rows(again.report)["local"].recall == 5 / 8
    before = log.read_bytes()
    with pytest.raises(RoutingError, match=r"other settings \(k 1 then, 2 now\)"):
        routing_report(params(toy, out, plot=False).model_copy(update={"k": 2}))
    assert log.read_bytes() == before


def test_the_json_is_the_typed_report_and_the_markdown_shows_every_row(toy, tmp_path):
    made = routing_report(params(toy, tmp_path / "out"))
    data = json.loads((tmp_path / "out" / JSON_NAME).read_text())
    assert RoutingReport.model_validate(data) == made.report
    assert set(data) >= {"settings", "questions", "best_fixed", "headroom", "rows", "notes", "verdict"}
    assert [r["kind"] for r in data["rows"]] == ["fixed", "fixed", "all", "oracle", "router", "router", "router"]
    assert [r["name"] for r in data["rows"]][4:] == ["profile-embedding", "keyword", "learned"]
    assert set(data["keyword_rules"]) == {"fold 1", "fold 2"}
    assert set(data["rows"][0]) >= {"name", "recall", "ms", "tokens", "cost_ratio", "recovered", "picks"}
    assert set(data["rows"][0]["recovered"]) >= {"share", "low", "high", "headroom", "gain"}
    md = (tmp_path / "out" / MARKDOWN_NAME).read_text()
    assert md.startswith("# Is routing worth it on this data?") and f"**Verdict:** {made.report.verdict}." in md
    assert "| choice / router | recall@1 | ms | evidence tokens | cost vs best fixed | headroom recovered (95 % CI) |" in md
    table = [line for line in md.splitlines() if line.startswith("| ")][1:]
    assert [line.split(" | ")[0].removeprefix("| ") for line in table] == [r.name for r in made.report.rows]
    assert "| oracle | 100.0 |" in md and "| local | 62.5 |" in md
    assert "`llm` router is not measured" in md
    assert "## Keyword rules" in md and "- fold 1: `" in md and "`\\btreats\\b` -> global" in md
    assert "; otherwise local" in md
    plot = made.files.get("plot")
    if plot is None:  # matplotlib is the `eval` extra
        assert "matplotlib is not installed" in made.plot_skipped
    else:
        assert plot == tmp_path / "out" / PLOT_NAME and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_matplotlib_the_figure_is_skipped_with_the_reason(toy, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    made = routing_report(params(toy, tmp_path / "out", learned=None))
    assert "plot" not in made.files and not (tmp_path / "out" / PLOT_NAME).exists()
    assert "matplotlib is not installed" in made.plot_skipped and "pip install 'routerag[eval]'" in made.plot_skipped
    assert "the learned router was not cross-validated (asked not to)" in made.report.notes


@pytest.mark.parametrize(("args", "message"), [
    (["-c", "local,nope"], "error: unknown mode or source nope; the index mounts: local, global"),
    (["-c", "local"], "error: routing needs two or more modes or sources to choose between; asked for only local"),
])
def test_bad_choices_are_one_line_usage_errors(toy, tmp_path, args, message):
    result = runner.invoke(app, ["routing-report", "-d", f"file:{toy}", "-o", str(tmp_path / "out"), "--source-mode", "bm25",
                                 "--no-progress", *args])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == message
    assert not (tmp_path / "out" / OUTCOMES_NAME).exists()


def test_questions_without_gold_answers_and_an_index_of_one_mode_are_refused(toy, tmp_path):
    docs = json.loads((toy / "toy_corpus_local.json").read_text())
    bare = write_realroute(tmp_path / "bare", docs, docs, [])  # passages, no question file
    result = runner.invoke(app, ["routing-report", "-d", f"file:{bare}", "-o", str(tmp_path / "out"), "--no-progress"])
    assert result.exit_code == 2
    assert result.output.strip() == (f"error: file:{bare}: it holds no questions, hence no gold answers; recall@k needs "
                                     "questions with gold answers (an `answer`, `answers` or `golden_answers` field)")
    from routerag.corpus.datasets import Dataset, register_dataset
    from routerag.corpus.schema import Question

    register_dataset("routing-report-no-gold", lambda: Dataset(name="no-gold", questions=[
        Question(qid="q", question="Who?", answers=[])]), replace=True)
    with pytest.raises(RoutingReportError, match="none of its 1 questions has gold answers"):
        routing_report(params("routing-report-no-gold", tmp_path / "out2"))
    from routerag.api import index_documents
    from routerag.corpus.schema import Document

    index = tmp_path / "bm25-only"
    index_documents([Document.make(d["title"], d["text"]) for d in docs], index, components=("bm25",))
    with pytest.raises(RoutingReportError, match="the index mounts only bm25"):
        routing_report(params(toy, tmp_path / "out3", index_dir=index))


def test_a_prebuilt_index_serves_the_questions_of_a_plain_question_file(tmp_path):
    from routerag.api import index_documents
    from routerag.corpus.schema import Document

    index = tmp_path / "index"
    docs = [Document.make(city, f"{city} is the capital of {country}.") for country, city in CAPITALS]
    index_documents(docs, index, components=("dense", "bm25"))  # dense vectors of the toy embedder
    qa = tmp_path / "qa.jsonl"
    qa.write_text("".join(json.dumps({"question": f"Which city is the capital of {c}?", "answer": a}) + "\n" for c, a in CAPITALS))
    made = routing_report(params(qa, tmp_path / "out", index_dir=index, plot=False, learned=None))
    assert made.report.settings.choices == ["passage", "bm25"] and made.report.settings.index == str(index.resolve())
    assert rows(made.report)["bm25"].recall == 1.0  # the country names the passage
    assert rows(made.report)["oracle"].recall == 1.0 and made.report.headroom >= 0


def bundled_slice(tmp_path: Path) -> Path:
    """A few dozen passages of the bundled data: the demo 2Wiki passages that hold the answers of
    its first three questions (``local``) and the bundled table rows (``global``), with three
    questions of each."""
    from routerag.corpus.datasets import load_dataset
    from routerag.trace import Hit
    from routerag.train.router.labels import answer_rank

    def hit(d) -> Hit:
        return Hit(doc_id=d.doc_id, title=d.title, text=d.text, score=0.0, source="", mode="", rank=1)

    def holding(docs, q, n):
        return [d for d in docs if answer_rank([hit(d)], q.answers) is not None][:n]

    demo, tables = load_dataset("demo"), load_dataset("tables")
    text_q, table_q = demo.questions[:3], tables.questions[:3]
    text = list({d.doc_id: d for q in text_q for d in holding(demo.corpus, q, 2)}.values()) + demo.corpus[:8]
    rows = list({d.doc_id: d for q in table_q for d in holding(tables.corpus, q, 2)}.values()) + tables.corpus[:8]
    assert len(text) <= 14 and len(rows) <= 14

    def as_json(docs):
        return list({d.doc_id: {"title": d.title, "text": d.text} for d in docs}.values())

    questions = [{"_id": q.qid, "type": f"singlehop_{side}", "question": q.question, "answer": q.answer, "context": []}
                 for side, qs in (("local", text_q), ("global", table_q)) for q in qs]
    return write_realroute(tmp_path / "bundled", as_json(text), as_json(rows), questions, prefix="bundled")


def test_on_a_slice_of_the_bundled_data_without_the_benchmark_folder(tmp_path):
    import os

    from routerag.corpus.datasets import DataNotFoundError, data_root

    assert os.environ["ROUTERAG_DATA_DIR"].startswith("/nonexistent")  # conftest: as on a clone without ../shared/data
    with pytest.raises(DataNotFoundError):
        data_root()
    folder = bundled_slice(tmp_path)
    made = routing_report(params(folder, tmp_path / "out", plot=False).model_copy(update={"k": 3}))
    by_name = rows(made.report)
    assert made.report.questions == 6
    assert by_name["oracle"].recall >= max(by_name["local"].recall, by_name["global"].recall)
    assert by_name["retrieve all"].recall == by_name["oracle"].recall
    assert by_name["local"].recall >= 2 / 6 and by_name["global"].recall >= 2 / 6  # each source answers its own questions
    assert made.report.verdict


# ------------------------------------------------------------------ keyword rules


def test_the_fitted_keyword_rules_are_a_cross_validated_row_with_their_share_of_the_headroom(toy, tmp_path):
    made = routing_report(params(toy, tmp_path / "out", plot=False, learned=None))
    report, by_name = made.report, rows(made.report)
    keyword = by_name["keyword"]
    assert keyword.kind == "router" and keyword.note.startswith("cross-validated: words fitted per fold")
    # each fold learned "treats" -> global from its training questions and routes the held-out ones with it
    assert keyword.recall == 1.0 and keyword.picks == {"local": 0.625, "global": 0.375}
    assert keyword.recovered.share == pytest.approx(1.0) and keyword.recovered.low is not None
    from routerag.routing.keyword import KeywordRouter

    for rules in report.keyword_rules.values():  # each fold's default is its training questions' best fixed choice
        fold = KeywordRouter(rules)
        assert fold.decide("What treats gout?") == "global" and fold.decide("What is the capital of Chile?") == "local"
        assert rules.rules and {r.choice for r in rules.rules} == {"local", "global"} - {rules.default}
    assert keyword.tokens == by_name["oracle"].tokens  # it sends every question where the oracle does
    assert report.verdict.endswith("; the fitted no-model keyword rules recover 100 % (95 % CI 100 % to 100 %) at "
                                   f"{keyword.cost_ratio:.1f}x")
    off = routing_report(params(toy, tmp_path / "off", plot=False, learned=None, keyword=None))
    assert "keyword" not in rows(off.report) and "the keyword rules were not fitted (asked not to)" in off.report.notes


def outcome(qid: str, question: str, local: bool, other: bool) -> QuestionOutcome:
    def found(ok: bool) -> ChoiceOutcome:
        return ChoiceOutcome(found=ok, ms=1.0, tokens=10)

    return QuestionOutcome(position=0, qid=qid, question=question, golds=["x"],
                           choices={"local": found(local), "global": found(other)}, every=found(local or other))


def test_the_fit_never_sees_the_held_out_fold():
    """"zebra" is in three questions only, each answered by ``global`` alone: fitted on all of them
    it is a rule (support 3), but a fold that holds one out keeps two, under the minimum support, so
    no held-out zebra question is routed by a rule made from itself."""
    records = [outcome(f"q{i:02d}", f"Who founded company {i}?", True, False) for i in range(9)]
    records += [outcome(f"z{i}", f"Where does zebra {i} live?", False, True) for i in range(3)]
    settings = KeywordSettings(folds=3, min_support=3)
    on_all = fit_rules(records, ["local", "global"], settings)
    assert (r"\bzebra\b", "global") in [(r.pattern, r.choice) for r in on_all.rules] and on_all.default == "local"
    chosen, fitted = cross_validated_choices(records, ["local", "global"], settings)
    splits = grouped_folds(np.array([r.qid for r in records]), settings.folds)
    assert len(fitted) == len(splits) == 3
    for (train, test), rules in zip(splits, fitted):
        trained = {w for i in train for w in words(records[i].question)}
        assert all(rule.pattern.removeprefix(r"\b").removesuffix(r"\b") in trained for rule in rules.rules)
        if any(records[i].qid.startswith("z") for i in test):
            assert not rules.rules  # two zebra questions left in training: no rule
    assert chosen[9:] == ["local"] * 3  # every zebra question by the default of a fold that never saw it


def write_rules(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_the_operators_rules_file_is_reported_as_written(toy, tmp_path):
    rules = write_rules(tmp_path / "rules.yaml", "rules:\n  - {pattern: '\\btreat', choice: global}\ndefault: local\n")
    made = routing_report(params(toy, tmp_path / "out", plot=False, learned=None, keyword=None, rules=rules))
    row = rows(made.report)["keyword (rules file)"]
    assert row.recall == 1.0 and row.picks == {"local": 0.625, "global": 0.375}
    assert row.note == "the operator's rules rules.yaml: 1 rules, default local; not fitted"
    assert made.report.keyword_rules["rules file"].rules[0].pattern == "\\btreat"
    assert "- rules file: `\\btreat` -> global; otherwise local" in (tmp_path / "out" / MARKDOWN_NAME).read_text()


@pytest.mark.parametrize(("text", "message"), [
    ("rules:\n  - {pattern: treat, choice: graph}\ndefault: local\n",
     "error: keyword rules send to 'graph', not among the choices local, global"),
    ("rules:\n  - {pattern: '(treat', choice: global}\ndefault: local\n",
     "error: keyword rule 1 ('(treat' -> global): not a regular expression: missing ), unterminated subpattern at position 0"),
])
def test_a_rules_file_that_cannot_be_used_is_a_one_line_usage_error_before_any_search(toy, tmp_path, text, message):
    rules = write_rules(tmp_path / "rules.yaml", text)
    result = runner.invoke(app, ["routing-report", "-d", f"file:{toy}", "-o", str(tmp_path / "out"), "--source-mode", "bm25",
                                 "--no-progress", "--rules", str(rules)])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == message
    assert not (tmp_path / "out" / OUTCOMES_NAME).exists()
