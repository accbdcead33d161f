"""One evaluation runner: ``routerag eval``'s runner and the service's runs answer each question with
the same per-question function and write the same records (the Ray engine's records are compared
with the thread pool's in tests/integration/test_ray_eval.py)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from routerag.corpus.schema import Question
from routerag.eval.runner import RunSpec, run_evaluation
from routerag.eval.runs import RunDir
from routerag.llm.base import GenerationParams, Message
from routerag.llm.scripted import ScriptedModel
from routerag.runtime.base import StrategyContext
from routerag.runtime.loop import LoopStrategy, add_step, call_model, retrieve_step
from routerag.server.jobs import ConfigInfo, PreparedConfig, RunManager
from routerag.sources.base import QueryResult
from routerag.sources.sourceset import SourceSet
from routerag.trace import Hit, Trace

CAPITALS = {"France": "Paris", "Spain": "Madrid", "Peru": "Lima", "Japan": "Tokyo"}


class ToySource:
    """Test double of a passage source: one passage per country."""

    name, mode, profile = "wiki", "passage", "capital cities"

    def search(self, queries: Sequence[str], k: int) -> list[QueryResult]:
        out = []
        for q in queries:
            found = [(c, f"The capital of {c} is {city}.") for c, city in CAPITALS.items() if c in q][:k]
            hits = [Hit(doc_id=f"d-{c}", title=c, text=t, score=1.0, source=self.name, mode=self.mode, rank=r)
                    for r, (c, t) in enumerate(found, start=1)]
            out.append(QueryResult(query=q, source=self.name, hits=hits, latency_ms=0.1))
        return out


class Lookup(LoopStrategy):
    """One retrieval, one answer call; raises on Japan (a strategy error is a record too)."""

    name = "lookup"

    class Params(BaseModel):
        k: int = 1

    def execute(self, trace: Trace) -> None:
        if "Japan" in trace.question:
            raise RuntimeError("no answer for Japan")
        step = retrieve_step(self.context, trace, trace.question, ["wiki"], self.params.k, lambda hits: hits[0].text)
        messages = [Message(role="user", content=f"{step.observation}\\nQuestion: {trace.question}")]
        response, call = call_model(self.context, messages, GenerationParams(max_tokens=8), "answer")
        add_step(trace, "answer", answer=response.text, model_calls=[call])
        trace.answer = response.text


def reply(messages, params, continue_final) -> str:
    text = messages[-1].content
    return "Lima" if "Spain" in text else text.split(" is ", 1)[1].split(".", 1)[0]  # Spain answered wrong


def make() -> Lookup:
    return Lookup(StrategyContext(model=ScriptedModel(reply), sources=SourceSet([ToySource()])))


QUESTIONS = [Question(qid=f"q{i}", question=f"What is the capital of {c}?", answers=[city], dataset="toy", gold_source="wiki")
             for i, (c, city) in enumerate(CAPITALS.items())]


def timeless(value: Any) -> Any:
    """The record without wall-clock times (the only thing two runs of the same question differ in)."""
    if isinstance(value, dict):
        return {k: timeless(v) for k, v in value.items() if "latency" not in k and not k.endswith("_ms")}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


def test_routerag_eval_and_a_service_run_write_identical_records(tmp_path) -> None:
    run_evaluation(RunSpec(name="cli", dataset="toy", strategy="lookup"), QUESTIONS, make, tmp_path / "cli")
    cli = {r.qid: r for r in RunDir(tmp_path / "cli").read_records()}

    manager = RunManager(workers=2, store_dir=tmp_path / "service")
    try:
        status = manager.submit([PreparedConfig(info=ConfigInfo(label="lookup", strategy="lookup", params={"k": 1}), make=make)],
                                QUESTIONS, dataset="toy")
        deadline = time.monotonic() + 60
        while manager.status(status.run_id).finished_at is None:
            assert time.monotonic() < deadline, "the service run did not finish"
            time.sleep(0.02)
    finally:
        manager.shutdown()
    service = {r.qid: r for r in RunDir(tmp_path / "service" / status.run_id / "0").read_records()}

    assert sorted(cli) == sorted(service) == ["q0", "q1", "q2", "q3"]
    assert cli["q3"].error == "RuntimeError: no answer for Japan" and cli["q1"].metrics["em"] == 0.0
    for qid in cli:
        assert timeless(service[qid].model_dump(mode="json")) == timeless(cli[qid].model_dump(mode="json")), qid
