"""The resumable runner: records, crash recovery (interrupt + truncated last line), errors,
concurrency, configuration mismatches."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence

import pytest
from pydantic import BaseModel

from routerag.corpus.schema import Question
from routerag.eval.runner import RunSpec, run_evaluation
from routerag.eval.runs import RunDir, RunError
from routerag.llm.base import GenerationParams, Message
from routerag.llm.scripted import ScriptedModel
from routerag.registry import UnknownNameError
from routerag.runtime.base import StrategyContext
from routerag.runtime.loop import LoopStrategy, add_step, call_model, retrieve_step
from routerag.sources.base import QueryResult
from routerag.sources.sourceset import SourceSet
from routerag.trace import Hit, Trace

CAPITALS = {
    "France": "Paris",
    "Spain": "Madrid",
    "Italy": "Rome",
    "Peru": "Lima",
    "Chile": "Santiago",
    "Kenya": "Nairobi",
    "Japan": "Tokyo",
    "Egypt": "Cairo",
    "Norway": "Oslo",
    "Cuba": "Havana",
}


class ToySource:
    """Test double of a passage source: word-overlap search over a few passages."""

    mode = "passage"
    profile = "capital cities"

    def __init__(self, name: str = "wiki") -> None:
        self.name = name
        self.docs = [(c, f"The capital of {c} is {city}.") for c, city in CAPITALS.items()]

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]:
        out = []
        for q in queries:
            words = set(q.lower().replace("?", "").split())
            scored = sorted(self.docs, key=lambda d: -len(words & set(d[1].lower().rstrip(".").split())))[:k]
            hits = [
                Hit(doc_id=f"d-{t}", title=t, text=x, score=1.0 / r, source=self.name, mode=self.mode, rank=r)
                for r, (t, x) in enumerate(scored, start=1)
            ]
            out.append(QueryResult(query=q, source=self.name, hits=hits, latency_ms=0.1))
        return out


class LookupStrategy(LoopStrategy):
    """One retrieval, one answer call: a real loop over the scripted model and the toy source."""

    name = "lookup"

    class Params(BaseModel):
        k: int = 2

    def execute(self, trace: Trace) -> None:
        step = retrieve_step(self.context, trace, trace.question, ["wiki"], self.params.k, lambda hits: "\n".join(h.text for h in hits))
        messages = [Message(role="user", content=f"{step.observation}\nQuestion: {trace.question}")]
        response, call = call_model(self.context, messages, GenerationParams(max_tokens=16), "answer")
        add_step(trace, "answer", answer=response.text, model_calls=[call])
        trace.answer = response.text


def responder(messages, params, continue_final) -> str:
    """Right for most countries, wrong for Peru and Cuba (so EM is 0.8)."""
    question = messages[-1].content.rsplit("Question: ", 1)[1]
    country = question.rsplit(" ", 1)[1].rstrip("?")
    if country in ("Peru", "Cuba"):
        return "Buenos Aires"
    return f"It is {CAPITALS[country]}" if country == "Japan" else CAPITALS[country]


def questions() -> list[Question]:
    return [
        Question(qid=f"q{i}", question=f"What is the capital of {c}?", answers=[city], dataset="toy", gold_source="wiki")
        for i, (c, city) in enumerate(CAPITALS.items())
    ]


def factory(**overrides):
    def make():
        ctx = StrategyContext(model=ScriptedModel(responder), sources=SourceSet([ToySource()]))
        return LookupStrategy(ctx, overrides or None)

    return make


SPEC = RunSpec(name="toy-run", dataset="toy", strategy="lookup")


def lines(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def test_full_run_records_and_summary(tmp_path) -> None:
    outcome = run_evaluation(SPEC, questions(), factory(), tmp_path / "run")
    s = outcome.summary
    assert (outcome.ran, outcome.skipped) == (10, 0)
    assert s.complete and s.n_done == 10 and s.n_errors == 0
    assert s.metrics["em"] == pytest.approx(0.7)  # Peru, Cuba wrong; Japan "It is Tokyo" not exact
    assert s.metrics["cover_em"] == pytest.approx(0.8)
    assert s.metrics["f1"] == pytest.approx((7 + 0.5) / 10)  # "It is Tokyo" scores F1 1/2 (next test)
    assert s.cost.retrieval_turns == 1.0 and s.cost.prompt_tokens > 0 and s.cost.completion_tokens > 0
    assert s.routing is not None and s.routing.accuracy == 1.0
    assert s.mode_usage_by_turn == {1: {"wiki": 10}}
    recs = lines(tmp_path / "run")
    # answered in spread (bit-reversed) order; each record keeps its sample position
    assert [r["qid"] for r in recs] == ["q0", "q8", "q4", "q2", "q6", "q1", "q9", "q5", "q3", "q7"]
    assert all(r["qid"] == f"q{r['position']}" for r in recs)
    assert recs[0]["trace"]["steps"][0]["kind"] == "search" and recs[0]["golds"] == ["Paris"]
    header = RunDir(tmp_path / "run").read_header()
    assert header.sample_qids == [f"q{i}" for i in range(10)] and header.versions.python
    stored = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert stored["metrics"]["em"] == pytest.approx(0.7)
    # a second call finds everything done and changes nothing
    again = run_evaluation(SPEC, questions(), factory(), tmp_path / "run")
    assert (again.ran, again.skipped) == (0, 10) and len(lines(tmp_path / "run")) == 10


def test_f1_of_partial_answer_is_hand_checked() -> None:
    # "It is Tokyo" -> tokens [it, is, tokyo], gold [tokyo]: P=1/3, R=1, F1 = 2*(1/3)/(4/3) = 1/2
    from routerag.eval.metrics import token_f1

    assert token_f1("It is Tokyo", ["Tokyo"]) == pytest.approx(0.5)


class Interrupting:
    """Wraps a strategy; raises KeyboardInterrupt on the (n+1)-th question (a simulated kill)."""

    def __init__(self, inner, n: int) -> None:
        self.inner, self.n, self.count = inner, n, 0

    def run(self, question):
        self.count += 1
        if self.count > self.n:
            raise KeyboardInterrupt
        return self.inner.run(question)


def test_resume_after_interrupt_and_truncated_line(tmp_path) -> None:
    reference = run_evaluation(SPEC, questions(), factory(), tmp_path / "clean").summary
    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_evaluation(SPEC, questions(), lambda: Interrupting(factory()(), 4), run)
    assert [r["qid"] for r in lines(run)] == ["q0", "q8", "q4", "q2"]  # spread over the sample, not its head
    partial = json.loads((run / "summary.json").read_text())
    assert partial["complete"] is False and partial["n_done"] == 4
    # crash mid-write of the 5th record: half a line, no newline
    fifth = (tmp_path / "clean" / "results.jsonl").read_text().splitlines()[4]
    with (run / "results.jsonl").open("a") as handle:
        handle.write(fifth[: len(fifth) // 2])
    outcome = run_evaluation(SPEC, questions(), factory(), run)
    assert outcome.recovery.repaired and outcome.recovery.records == 4
    assert outcome.recovery.truncated_bytes == len(fifth[: len(fifth) // 2].encode())
    assert (outcome.skipped, outcome.ran) == (4, 6)
    qids = [r["qid"] for r in lines(run)]
    assert sorted(qids) == sorted(f"q{i}" for i in range(10)) and len(qids) == 10  # nothing lost, nothing twice
    assert outcome.summary.metrics == reference.metrics
    assert outcome.summary.complete


def test_spread_order_prefixes_cover_the_sample_and_sample_order_is_kept_on_request(tmp_path) -> None:
    from routerag.corpus.sampling import spread_order

    for n in (0, 1, 2, 7, 10, 100, 1000):
        order = spread_order(n)
        assert sorted(order) == list(range(n))  # a permutation
    for n in (10, 100, 1000):
        order = spread_order(n)
        for k in (2, 4, 8, 16, 32, 64):  # any prefix of k leaves no gap wider than 2n/k (the head of a file: n - k)
            finished = [*sorted(order[: min(k, n)]), n]
            assert max(b - a for a, b in zip(finished, finished[1:])) <= 2 * n / min(k, n)
    assert spread_order(100)[:4] == [0, 64, 32, 96]
    run = tmp_path / "in-order"
    with pytest.raises(KeyboardInterrupt):
        run_evaluation(SPEC, questions(), lambda: Interrupting(factory()(), 3), run, order="sample")
    assert [r["qid"] for r in lines(run)] == ["q0", "q1", "q2"]
    outcome = run_evaluation(SPEC, questions(), factory(), run)  # resuming in the other order loses nothing
    assert (outcome.skipped, outcome.ran) == (3, 7) and sorted(r["position"] for r in lines(run)) == list(range(10))
    with pytest.raises(ValueError, match="valid: spread, sample"):
        run_evaluation(SPEC, questions(), factory(), tmp_path / "bad", order="random")  # type: ignore[arg-type]


def test_corrupt_line_in_the_middle_is_refused(tmp_path) -> None:
    run = tmp_path / "run"
    run_evaluation(SPEC, questions()[:3], factory(), run)
    path = run / "results.jsonl"
    rows = path.read_text().splitlines(keepends=True)
    damaged = rows[0] + "{not json\n" + "".join(rows[1:])
    path.write_text(damaged)
    with pytest.raises(RunError, match="line 2 is corrupt"):
        run_evaluation(SPEC, questions()[:3], factory(), run)
    assert path.read_text() == damaged  # untouched


class Failing:
    def __init__(self, inner, bad: str) -> None:
        self.inner, self.bad = inner, bad

    def run(self, question):
        if question.qid == self.bad:
            raise RuntimeError("server went away")
        return self.inner.run(question)


def test_strategy_error_is_recorded_and_retried(tmp_path) -> None:
    run = tmp_path / "run"
    outcome = run_evaluation(SPEC, questions(), lambda: Failing(factory()(), "q2"), run)
    assert outcome.summary.n_done == 10 and outcome.summary.n_errors == 1
    bad = [r for r in lines(run) if r["qid"] == "q2"][0]
    assert bad["error"] == "RuntimeError: server went away" and bad["metrics"]["em"] == 0.0
    assert bad["trace"]["error_kind"] == "other"
    retry = run_evaluation(SPEC, questions(), factory(), run, retry_errors=True)
    assert (retry.retried_errors, retry.ran, retry.skipped) == (1, 1, 9)
    assert retry.summary.n_errors == 0 and len(lines(run)) == 10


def test_concurrency_gives_the_same_records(tmp_path) -> None:
    sequential = run_evaluation(SPEC, questions(), factory(), tmp_path / "a")
    threads: set[str] = set()

    class Recording:
        def __init__(self) -> None:
            self.inner = factory()()

        def run(self, question):
            threads.add(threading.current_thread().name)
            return self.inner.run(question)

    parallel = run_evaluation(SPEC, questions(), Recording, tmp_path / "b", concurrency=3)
    assert parallel.summary.metrics == sequential.summary.metrics
    a = {r["qid"]: r["prediction"] for r in lines(tmp_path / "a")}
    b = {r["qid"]: r["prediction"] for r in lines(tmp_path / "b")}
    assert a == b and len(lines(tmp_path / "b")) == 10
    assert len(threads) > 1 and all(t.startswith("eval") for t in threads)


def test_interrupt_with_threads_then_resume(tmp_path) -> None:
    run = tmp_path / "run"
    counter = {"n": 0}
    lock = threading.Lock()

    class Killer:
        def __init__(self) -> None:
            self.inner = factory()()

        def run(self, question):
            with lock:
                counter["n"] += 1
                n = counter["n"]
            if n == 5:
                raise KeyboardInterrupt
            return self.inner.run(question)

    with pytest.raises(KeyboardInterrupt):
        run_evaluation(SPEC, questions(), Killer, run, concurrency=2)
    done = [r["qid"] for r in lines(run)]
    assert len(done) == len(set(done)) and len(done) < 10
    outcome = run_evaluation(SPEC, questions(), factory(), run, concurrency=2)
    qids = [r["qid"] for r in lines(run)]
    assert sorted(qids) == sorted(f"q{i}" for i in range(10)) and outcome.summary.complete


def test_resume_refuses_other_configuration_or_sample(tmp_path) -> None:
    run = tmp_path / "run"
    run_evaluation(SPEC, questions()[:4], factory(), run)
    with pytest.raises(RunError, match="another configuration"):
        run_evaluation(SPEC.model_copy(update={"fingerprint": "other"}), questions()[:4], factory(), run)
    with pytest.raises(RunError, match="sampled other questions"):
        run_evaluation(SPEC, questions()[:5], factory(), run)


def test_unknown_metric_and_duplicate_qids(tmp_path) -> None:
    with pytest.raises(UnknownNameError, match="unknown metric 'bleu'; valid: .*em"):
        run_evaluation(SPEC.model_copy(update={"metrics": ["em", "bleu"]}), questions(), factory(), tmp_path / "x")
    with pytest.raises(ValueError, match="occurs twice"):
        run_evaluation(SPEC, questions() + questions()[:1], factory(), tmp_path / "y")


def test_question_without_gold_has_no_scores(tmp_path) -> None:
    q = Question(qid="open", question="What is the capital of France?", answers=[])
    outcome = run_evaluation(SPEC, [q], factory(), tmp_path / "run")
    assert lines(tmp_path / "run")[0]["metrics"] == {"em": None, "f1": None, "cover_em": None, "f1_recall": None}
    assert outcome.summary.metric_counts["em"] == 0


def test_judge_metric_is_recorded(tmp_path) -> None:
    from routerag.eval.metrics import LLMJudge

    judge = LLMJudge(ScriptedModel(["yes"], cycle=True))
    run_evaluation(SPEC, questions()[:2], factory(), tmp_path / "run", judge=judge)
    recs = lines(tmp_path / "run")
    assert all(r["metrics"]["judge"] == 1.0 and r["judge_raw"] == "yes" for r in recs)


@pytest.mark.data
def test_a_dataset_with_released_openie_builds_its_graph_from_it():
    from routerag.corpus.datasets import load_dataset
    from routerag.eval.config import EvalConfig
    from routerag.run.assemble import index_settings_for

    musique = load_dataset("musique")
    assert musique.openie_path is not None
    settings = index_settings_for(musique, EvalConfig(dataset="musique"))
    assert settings.graph.extractor == "precomputed" and settings.graph.openie_file == str(musique.openie_path)
    chosen = EvalConfig.model_validate({"dataset": "musique", "index": {"graph": {"extractor": "spacy"}}})
    assert index_settings_for(musique, chosen).graph.extractor == "spacy"  # an explicit choice wins
    wiki = load_dataset("2wiki")
    assert index_settings_for(wiki, EvalConfig(dataset="2wiki")).graph.extractor == "spacy"


def test_results_without_a_header_are_not_adopted(tmp_path) -> None:
    run = tmp_path / "run"
    run_evaluation(SPEC, questions()[:3], factory(), run)
    (run / "run.json").unlink()
    log = (run / "results.jsonl").read_bytes()
    with pytest.raises(RunError, match="3 answered questions.*no run.json"):
        run_evaluation(SPEC, questions()[:3], factory(), run)
    assert (run / "results.jsonl").read_bytes() == log and not (run / "run.json").exists()
    # an empty log (a crash before the first answer) is nothing to lose: the run starts
    (run / "results.jsonl").write_bytes(b"")
    assert run_evaluation(SPEC, questions()[:3], factory(), run).ran == 3


def test_a_compressed_log_reads_resumes_and_retries_like_a_plain_one(tmp_path) -> None:
    import lzma

    from routerag.eval.runs import ResultsLog

    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_evaluation(SPEC, questions(), lambda: Interrupting(Failing(factory()(), "q8"), 4), run)
    log = ResultsLog(run / "results.jsonl")
    plain = (run / "results.jsonl").read_bytes()
    report = log.compress()
    assert (report.records, report.plain_bytes) == (4, len(plain)) and report.packed_bytes < len(plain)
    assert not (run / "results.jsonl").exists() and lzma.decompress((run / "results.jsonl.xz").read_bytes()) == plain
    assert log.location == run / "results.jsonl.xz" and [r.qid for r in log.read()] == ["q0", "q8", "q4", "q2"]
    assert log.compress().already  # a second compress changes nothing
    # resume: the compressed log is unpacked, then appended to; nothing lost or twice
    outcome = run_evaluation(SPEC, questions(), factory(), run)
    assert (outcome.skipped, outcome.ran) == (4, 6) and outcome.summary.n_errors == 1
    assert not (run / "results.jsonl.xz").exists() and sorted(r["qid"] for r in lines(run)) == sorted(f"q{i}" for i in range(10))
    log.compress()
    retry = run_evaluation(SPEC, questions(), factory(), run, retry_errors=True)  # rewrite of a compressed log
    assert (retry.retried_errors, retry.ran) == (1, 1) and retry.summary.n_errors == 0
    assert not (run / "results.jsonl.xz").exists() and len(lines(run)) == 10
    log.compress()
    done = run_evaluation(SPEC, questions(), factory(), run)  # a finished compressed run stays compressed
    assert (done.ran, done.skipped) == (0, 10) and (run / "results.jsonl.xz").exists() and not (run / "results.jsonl").exists()


def test_a_log_packed_as_gzip_reads_resumes_and_is_repacked_as_xz(tmp_path) -> None:
    """Runs stored before the xz form (results.jsonl.gz) read, resume and report as before;
    ``compress`` re-packs them as xz (verified, then the gzip removed); both packed files at once
    (a re-pack cut between its steps) are read only when they agree."""
    import gzip
    import lzma

    from routerag.eval.runs import ResultsLog

    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_evaluation(SPEC, questions()[:4], lambda: Interrupting(factory()(), 2), run)
    plain = (run / "results.jsonl").read_bytes()
    (run / "results.jsonl.gz").write_bytes(gzip.compress(plain, mtime=0))
    (run / "results.jsonl").unlink()
    log = ResultsLog(run / "results.jsonl")
    assert log.location == run / "results.jsonl.gz" and [r.qid for r in log.read()] == [r["qid"] for r in map(json.loads, plain.splitlines())]
    report = log.compress()
    assert report.repacked and not report.already and report.records == 2
    assert not (run / "results.jsonl.gz").exists() and lzma.decompress((run / "results.jsonl.xz").read_bytes()) == plain
    assert log.compress().already
    # both packed forms: refused when they differ (nothing changed), the gzip dropped when they agree
    (run / "results.jsonl.gz").write_bytes(gzip.compress(plain.splitlines(keepends=True)[0]))
    with pytest.raises(RunError, match="both results.jsonl.xz and results.jsonl.gz exist"):
        log.read()
    with pytest.raises(RunError, match="hold different records"):
        log.compress()
    assert (run / "results.jsonl.gz").exists() and (run / "results.jsonl.xz").exists()
    (run / "results.jsonl.gz").write_bytes(gzip.compress(plain))
    assert log.compress().already and not (run / "results.jsonl.gz").exists()
    # resuming unpacks the xz log and appends
    outcome = run_evaluation(SPEC, questions()[:4], factory(), run)
    assert (outcome.skipped, outcome.ran) == (2, 2) and not (run / "results.jsonl.xz").exists() and len(lines(run)) == 4


def test_compressed_and_plain_logs_side_by_side(tmp_path) -> None:
    """A crash between writing one form and removing the other leaves both: read as one log when
    they agree, refused (nothing changed) when they differ; a damaged xz or gzip is refused."""
    import gzip
    import lzma

    from routerag.eval.runs import ResultsLog

    run = tmp_path / "run"
    run_evaluation(SPEC, questions()[:3], factory(), run)
    plain = (run / "results.jsonl").read_bytes()
    (run / "results.jsonl.xz").write_bytes(lzma.compress(plain))
    log = ResultsLog(run / "results.jsonl")
    assert len(log.read()) == 3
    assert run_evaluation(SPEC, questions()[:3], factory(), run).skipped == 3
    (run / "results.jsonl.xz").write_bytes(lzma.compress(plain.splitlines(keepends=True)[0]))
    with pytest.raises(RunError, match="both results.jsonl and results.jsonl.xz exist and hold different records"):
        log.read()
    (run / "results.jsonl").unlink()
    (run / "results.jsonl.xz").write_bytes(lzma.compress(plain)[:-20])
    with pytest.raises(RunError, match="damaged compressed log"):
        run_evaluation(SPEC, questions()[:3], factory(), run)
    (run / "results.jsonl.xz").unlink()
    (run / "results.jsonl.gz").write_bytes(gzip.compress(plain)[:-20])
    with pytest.raises(RunError, match="damaged compressed log"):
        run_evaluation(SPEC, questions()[:3], factory(), run)
    # compressing refuses a log whose last line a crash cut
    (run / "results.jsonl.gz").unlink()
    (run / "results.jsonl").write_bytes(plain[:-10])
    with pytest.raises(RunError, match="resume the run before compressing"):
        log.compress()
    assert (run / "results.jsonl").read_bytes() == plain[:-10]


def test_a_record_delivered_twice_is_written_once(tmp_path, monkeypatch) -> None:
    """The one writer keeps the first record of a question (an engine may deliver one twice: Ray
    re-running a block whose output was lost)."""
    import routerag.eval.runner as runner

    def twice(todo, strategy_factory, concurrency, answer, finish):
        strategy = strategy_factory()
        for position, question in todo:
            record = answer(strategy, question, position)
            finish(record)
            finish(record)

    monkeypatch.setattr(runner, "_run_pool", twice)
    outcome = run_evaluation(SPEC, questions(), factory(), tmp_path / "run", concurrency=2)
    assert outcome.ran == 10 and sorted(r["qid"] for r in lines(tmp_path / "run")) == sorted(f"q{i}" for i in range(10))
