"""Reports rebuilt from stored runs, the paired bootstrap, and the plots."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from routerag.corpus.schema import Question
from routerag.eval.bootstrap import paired_bootstrap
from routerag.eval.plots import plot_all
from routerag.eval.report import build_report, load_run, load_runs, main_table, render_markdown, write_report
from routerag.eval.runner import RunSpec, run_evaluation
from routerag.trace import Hit, ModelCall, Step, Trace


class Scripted:
    """Test double of a strategy: answers and retrieval turns fixed per qid."""

    def __init__(self, answers: dict[str, str], modes: list[str]) -> None:
        self.answers, self.modes = answers, modes

    def run(self, question: Question) -> Trace:
        n = int(question.qid[1:]) % (len(self.modes) + 1)
        steps = [
            Step(
                index=i,
                kind="search",
                sources=[self.modes[i]],
                hits=[Hit(doc_id="d", title="t", text="x", score=1, source=self.modes[i], mode=self.modes[i], rank=1)],
                retrieval_ms=2.0,
                model_calls=[ModelCall(purpose="policy", prompt_tokens=100, completion_tokens=10, latency_ms=30)],
            )
            for i in range(n)
        ]
        return Trace(question=question.question, strategy="scripted", qid=question.qid, steps=steps, answer=self.answers[question.qid], latency_ms=40.0 * (n + 1))


def _questions(dataset: str, n: int = 20) -> list[Question]:
    return [Question(qid=f"q{i}", question=f"question {i}?", answers=[f"answer {i}"], dataset=dataset) for i in range(n)]


def _run(tmp_path, name: str, dataset: str, label: str, right: set[int], modes: list[str]):
    qs = _questions(dataset)
    answers = {q.qid: (q.answers[0] if int(q.qid[1:]) in right else "wrong") for q in qs}
    spec = RunSpec(name=name, dataset=dataset, strategy=label)
    run_evaluation(spec, qs, lambda: Scripted(answers, modes), tmp_path / name)
    return tmp_path / name


@pytest.fixture
def runs(tmp_path):
    return [
        _run(tmp_path, "base-2wiki", "2wiki", "baseline", set(range(0, 20, 4)), ["passage"]),  # 5/20
        _run(tmp_path, "ours-2wiki", "2wiki", "ours", set(range(0, 20, 2)), ["passage", "graph", "hybrid"]),  # 10/20
        _run(tmp_path, "base-musique", "musique", "baseline", {0, 1}, ["passage"]),  # 2/20
        _run(tmp_path, "ours-musique", "musique", "ours", {0, 1, 2, 3}, ["graph", "passage"]),  # 4/20
    ]


def test_tables_rebuilt_from_stored_runs_match_summaries(runs) -> None:
    loaded = load_runs(runs)
    assert all(r.summary_matches for r in loaded)
    table = main_table(loaded)
    assert table.datasets == ["2wiki", "musique"] and [r.label for r in table.rows] == ["baseline", "ours"]
    base, ours = table.rows
    assert base.scores["2wiki"]["em"] == pytest.approx(25.0) and base.scores["musique"]["em"] == pytest.approx(10.0)
    assert ours.scores["2wiki"]["em"] == pytest.approx(50.0) and ours.average["em"] == pytest.approx(35.0)
    for run in loaded:  # every cell equals the run's own summary.json
        stored = json.loads((Path(run.path) / "summary.json").read_text())
        row = next(r for r in table.rows if r.label == run.label)
        assert row.scores[run.header.dataset]["f1"] == pytest.approx(100 * stored["metrics"]["f1"])
    # retrieval turns: qid i takes i % (len(modes)+1) turns; baseline: 10 of 20 take 1 turn on each dataset
    assert base.retrieval_turns == pytest.approx(0.5)
    assert base.total_tokens == pytest.approx(0.5 * 110)


def test_report_files_and_comparison(runs, tmp_path) -> None:
    report = build_report(load_runs(runs), seed=7)
    files = write_report(report, tmp_path / "report")
    md = files["markdown"].read_text()
    assert ("| Method | 2wiki EM | 2wiki F1 | 2wiki open EM | 2wiki open F1 | musique EM | musique F1 | musique open EM "
            "| musique open F1 | Avg EM | Avg F1 | Avg open EM | Avg open F1 | Turns | Tokens | Latency (s) |") in md
    assert "| ours | 50.0 |" in md
    with files["table_csv"].open() as handle:
        rows = list(csv.reader(handle))
    assert rows[1][:2] == ["baseline", "25.0"]
    em_2wiki = next(c for c in report.comparisons if c.dataset == "2wiki" and c.metric == "em")
    assert em_2wiki.baseline == "baseline" and em_2wiki.system == "ours" and em_2wiki.subset == "all"
    assert em_2wiki.result.n == 20 and em_2wiki.result.diff == pytest.approx(0.25)
    # ours gets 5 more questions right, none fewer: exact sign test p = 2 * 0.5**5
    assert (em_2wiki.sign.b_better, em_2wiki.sign.a_better, em_2wiki.sign.ties) == (5, 0, 15)
    assert em_2wiki.sign.p_value == pytest.approx(0.0625)
    assert "| 2wiki | all | baseline | ours | EM | 20 | 25.0 | 50.0 | +25.0 |" in md and "| 5 / 0 | 0.062 |" in md
    assert em_2wiki.result.low <= 0.25 <= em_2wiki.result.high
    again = build_report(load_runs(runs), seed=7)
    assert again.comparisons == report.comparisons  # seeded
    assert json.loads(files["json"].read_text())["table"]["rows"][1]["label"] == "ours"


def test_report_flags_a_summary_that_no_longer_matches(runs) -> None:
    path = runs[0] / "results.jsonl"
    kept = path.read_text().splitlines(keepends=True)[:-1]
    path.write_text("".join(kept))
    run = load_run(runs[0])
    assert run.summary_matches is False and run.summary.n_done == 19
    report = build_report([run])
    assert any("differs" in w for w in report.warnings) and any("incomplete" in w for w in report.warnings)
    assert "## Warnings" in render_markdown(report)


def test_bootstrap_contains_true_difference() -> None:
    rng = np.random.default_rng(0)
    n = 400
    a = (rng.random(n) < 0.4).astype(float)  # true accuracy 0.40
    flip = rng.random(n) < 1 / 3  # b fixes a third of a's failures: true accuracy 0.40 + 0.6/3 = 0.60
    b = np.where(flip, 1.0, a)
    result = paired_bootstrap(a, b, resamples=5000, seed=1)
    assert result.low <= 0.2 <= result.high
    assert result.low > 0 and result.p_value < 0.01
    assert paired_bootstrap(a, b, resamples=5000, seed=1) == result


def test_bootstrap_coverage_is_near_nominal() -> None:
    rng = np.random.default_rng(3)
    hits = 0
    trials = 200
    for t in range(trials):
        a = (rng.random(100) < 0.5).astype(float)
        b = np.where(rng.random(100) < 0.2, 1.0 - a, a)  # E[b - a] = 0.2 * (1 - 2 * 0.5) = 0
        r = paired_bootstrap(a, b, resamples=1000, seed=t)
        hits += r.low <= 0.0 <= r.high
    assert 0.88 <= hits / trials <= 0.99


def test_bootstrap_rejects_unpaired() -> None:
    with pytest.raises(ValueError, match="paired"):
        paired_bootstrap([1.0, 0.0], [1.0])


def test_plots_are_written(runs, tmp_path) -> None:
    loaded = load_runs(runs)
    report = build_report(loaded)
    paths = plot_all(report.runs, report.table, tmp_path / "plots")
    assert [p.name for p in paths] == ["em_vs_turns.png", "em_per_dataset.png", "mode_usage.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5_000


class _StopAfter:
    def __init__(self, inner, n: int) -> None:
        self.inner, self.n = inner, n

    def run(self, question):
        if self.n == 0:
            raise KeyboardInterrupt
        self.n -= 1
        return self.inner.run(question)


def test_a_partial_run_is_marked_in_the_table_and_compared_on_shared_questions(runs, tmp_path) -> None:
    qs = _questions("2wiki")
    answers = {q.qid: q.answers[0] for q in qs}
    with pytest.raises(KeyboardInterrupt):  # stopped after 8 of 20, answered in spread order
        run_evaluation(RunSpec(name="p", dataset="2wiki", strategy="partial"), qs,
                       lambda: _StopAfter(Scripted(answers, ["passage"]), 8), tmp_path / "partial")
    report = build_report(load_runs([*runs, tmp_path / "partial"]), seed=0)
    row = next(r for r in report.table.rows if r.label == "partial")
    assert row.partial == {"2wiki": (8, 20)} and next(r for r in report.table.rows if r.label == "ours").partial == {}
    md = render_markdown(report)
    assert "| partial (partial: 2wiki 8/20) | 100.0 |" in md and "| ours | 50.0 |" in md
    cmp = next(c for c in report.comparisons if c.system == "partial" and c.metric == "em")
    assert cmp.result.n == 8  # paired over the 8 questions both runs answered


def test_comparisons_against_a_chosen_baseline(runs) -> None:
    loaded = load_runs(runs)
    default = build_report(loaded, seed=0).comparisons
    assert {(c.baseline, c.system) for c in default} == {("baseline", "ours")}
    chosen = build_report(loaded, seed=0, baseline="ours").comparisons
    assert {(c.baseline, c.system) for c in chosen} == {("ours", "baseline")}
    flipped = next(c for c in chosen if c.dataset == "2wiki" and c.metric == "em")
    assert flipped.result.diff == pytest.approx(-0.25)  # the same pairs, the other way round
    assert build_report(loaded, seed=0, baseline="nobody").comparisons == []


def test_report_cli_baseline_option(runs, tmp_path) -> None:
    from typer.testing import CliRunner

    import routerag.cli.eval_cmds  # noqa: F401 - registers the commands
    from routerag.cli.app import app

    result = CliRunner().invoke(app, ["report", *map(str, runs), "--baseline", "ours", "--out", str(tmp_path / "r"), "--no-plots"])
    assert result.exit_code == 0, result.output
    assert "| 2wiki | all | ours | baseline | EM |" in (tmp_path / "r" / "report.md").read_text()
    bad = CliRunner().invoke(app, ["report", *map(str, runs), "--baseline", "vanilla", "--out", str(tmp_path / "r")])
    assert bad.exit_code == 2 and "no run is labelled 'vanilla'; labels: baseline, ours" in bad.output


def test_runs_sharing_label_and_name_get_distinct_rows(tmp_path) -> None:
    # a rerun kept in another folder: same strategy label, same run name, same dataset
    first = _run(tmp_path / "rev0", "law", "2wiki", "realroute", {0}, ["passage"])
    second = _run(tmp_path / "rev1", "law", "2wiki", "realroute", {0, 1, 2}, ["passage"])
    loaded = load_runs([first, second])
    labels = [r.label for r in loaded]
    assert labels == ["realroute (rev0)", "realroute (rev1)"]
    table = main_table(loaded)
    assert [row.scores["2wiki"]["em"] for row in table.rows] == [pytest.approx(5.0), pytest.approx(15.0)]
    # a rerun's runs on other datasets join its row
    other = _run(tmp_path / "rev1", "law-musique", "musique", "realroute", {0}, ["passage"])
    assert [r.label for r in load_runs([first, second, other])] == ["realroute (rev0)", "realroute (rev1)", "realroute (rev1)"]
    # in one folder the run names tell them apart
    third = _run(tmp_path / "rev1", "law-b", "2wiki", "realroute", set(), ["passage"])
    assert [r.label for r in load_runs([second, third])] == ["realroute (rev1/law)", "realroute (rev1/law-b)"]
    with pytest.raises(Exception, match="given twice"):
        load_runs([first, first])


def test_routing_by_gold_source_counts_first_decisions(tmp_path) -> None:
    qs = [q.model_copy(update={"gold_source": "passage" if i % 2 == 0 else "graph"}) for i, q in enumerate(_questions("law"))]
    answers = {q.qid: "wrong" for q in qs}
    # Scripted searches n = i % 3 times: n=0 -> no decision, else the first search is "passage"
    run_evaluation(RunSpec(name="r", dataset="law", strategy="router"), qs, lambda: Scripted(answers, ["passage", "graph"]), tmp_path / "r")
    report = build_report(load_runs([tmp_path / "r"]))
    by_gold = {r.gold: r for r in report.routing_by_gold}
    decided = [i for i in range(20) if i % 3 != 0]
    passage_gold = [i for i in range(20) if i % 2 == 0]
    assert by_gold["passage"].n == 10 and by_gold["graph"].n == 10
    assert by_gold["passage"].chosen == {"passage": sum(i in decided for i in passage_gold), "(none)": sum(i not in decided for i in passage_gold)}
    assert by_gold["passage"].accuracy == pytest.approx(by_gold["passage"].chosen["passage"] / 10)
    assert by_gold["graph"].accuracy == 0.0
    assert report.runs[0].routing.accuracy == pytest.approx(sum(i in decided for i in passage_gold) / 20)
    markdown = render_markdown(report)
    assert "### Routing by gold source" in markdown and "| router | law | graph | 10 | 0.0 |" in markdown


def test_breakdown_by_question_form_and_dataset_type(tmp_path) -> None:
    """yes/no, choice and open questions (and MuSiQue hop counts from qids) get their own rows;
    comparisons are repeated on the open questions."""
    texts = ["Are A and B from the same country?", "Who was born first, Ann Lee or Bob Ray?", "Where was C born?",
             "Who directed D?"]
    golds = ["yes", "Bob Ray", "Paris", "Eve"]
    qs = [Question(qid=f"{2 + i % 2}hop__{i}", question=texts[i % 4], answers=[golds[i % 4]], dataset="musique") for i in range(8)]
    runs = []
    for label, right in (("rule", {0, 4}), ("reader", {0, 2, 3, 4, 6, 7})):
        answers = {q.qid: (q.answers[0] if i in right else "x") for i, q in enumerate(qs)}

        class Fixed:
            def run(self, question: Question, answers=answers, label=label) -> Trace:
                return Trace(question=question.question, strategy=label, qid=question.qid, answer=answers[question.qid])

        run_evaluation(RunSpec(name=label, dataset="musique", strategy=label), qs, Fixed, tmp_path / label)
        runs.append(tmp_path / label)
    loaded = load_runs(runs)
    reader = loaded[1].summary
    assert {g: s.n for g, s in reader.breakdown["form"].items()} == {"yes/no": 2, "choice": 2, "open": 4}
    assert reader.group("form", "open").metrics["em"] == pytest.approx(1.0)
    assert reader.group("form", "choice").metrics["em"] == 0.0
    assert {g: s.n for g, s in reader.breakdown["type"].items()} == {"2-hop": 4, "3-hop": 4}
    assert all(r.summary_matches for r in loaded)
    report = build_report(loaded)
    row = report.table.rows[1]
    assert row.open_scores["musique"]["em"] == pytest.approx(100.0) and row.scores["musique"]["em"] == pytest.approx(75.0)
    open_em = next(c for c in report.comparisons if c.subset == "open" and c.metric == "em")
    assert (open_em.result.n, open_em.sign.b_better, open_em.sign.a_better) == (4, 4, 0)
    md = render_markdown(report)
    assert "## By question type" in md and "| Method | yes/no EM (n=2) | choice EM (n=2) | open EM (n=4) | open F1 |" in md


def test_stop_evidence_tells_a_reader_of_evidence_from_a_fixed_stopper() -> None:
    from routerag.eval.cost import CostMetrics
    from routerag.eval.runs import QuestionRecord
    from routerag.eval.stopping import answer_in, stop_evidence, stop_evidence_rows

    def record(i: int, found: bool, searches: int, em: float, gold: str = "Paris") -> QuestionRecord:
        text = f"The capital is {gold}." if found else "Nothing useful here."
        steps = [Step(index=k, kind="search", sources=["passage"],
                      hits=[Hit(doc_id=f"d{k}", title="T", text=text if k == 0 else "more", score=1.0, source="passage",
                                mode="passage", rank=1)]) for k in range(searches)]
        trace = Trace(question="q?", strategy="routerag", qid=f"q{i}", steps=steps, answer=gold if em else "x")
        return QuestionRecord(position=i, qid=f"q{i}", question="q?", golds=[gold], prediction=trace.answer,
                              metrics={"em": em}, cost=CostMetrics(retrieval_turns=searches), trace=trace)

    assert answer_in(record(0, True, 1, 1.0).trace.steps[0].hits, ["paris"])  # normalised containment
    # stops after one search on 8 of 10 questions whose answer came back, on 1 of 10 whose answer did not
    reader = [record(i, True, 1 if i < 8 else 2, 1.0) for i in range(10)] + \
             [record(10 + i, False, 1 if i < 1 else 2, 0.0) for i in range(10)]
    row = stop_evidence("reader", "2wiki", reader)
    assert row is not None and (row.answer_back.n, row.answer_back.stopped) == (10, 8)
    assert (row.answer_missing.n, row.answer_missing.stopped) == (10, 1)
    assert row.p_value is not None and row.p_value < 0.01 and row.answer_back.em_stopped == 1.0
    # the same stop rate either way: no evidence that it reads
    fixed = [record(i, i % 2 == 0, 1 if i % 4 < 2 else 2, 0.0) for i in range(20)]
    row = stop_evidence("fixed", "2wiki", fixed)
    assert row is not None and row.p_value == 1.0
    # yes/no golds are left out ("yes" is in every text); a pipeline that never searches twice has no row
    assert stop_evidence("yes", "2wiki", [record(0, True, 2, 1.0, gold="yes"), record(1, True, 1, 1.0, gold="yes")]) \
        .answer_back.n == 0
    assert stop_evidence("vanilla", "2wiki", [record(i, True, 1, 1.0) for i in range(5)]) is None
    cols, rows = stop_evidence_rows([row])
    assert cols[-1] == "Fisher p" and [r[2] for r in rows] == ["yes", "no"] and rows[0][-1] == "1.000"


def test_csv_cells_that_a_spreadsheet_would_run_as_formulas_are_escaped(tmp_path) -> None:
    from routerag.eval.report import _csv, csv_cell

    assert csv_cell('=HYPERLINK("http://x","y")') == '\'=HYPERLINK("http://x","y")'
    assert [csv_cell(c) for c in ("+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\tx")] == [
        "'+cmd|' /C calc'!A0", "'-2+3", "'@SUM(A1)", "'\tx"]
    # numbers and the formatted statistics stay as they are (stored reports rebuild byte for byte)
    assert [csv_cell(c) for c in ("-3.0", "+17.0", "[-3.0, +17.0]", "–", "baseline", "0.062")] == [
        "-3.0", "+17.0", "[-3.0, +17.0]", "–", "baseline", "0.062"]
    text = _csv(["Method", "=cols"], [["=1+1", "-3.0"]])
    assert list(csv.reader(text.splitlines())) == [["Method", "'=cols"], ["'=1+1", "-3.0"]]
