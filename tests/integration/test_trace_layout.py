"""Traces stored in the old layout (step ``metadata`` keys, ``routing_reason``, ``kept_doc_ids``)
read into the typed records, checked on hand-made steps and on every stored run in docs/results."""

from __future__ import annotations

import gzip
import json
import lzma
from pathlib import Path

import pytest

from routerag.eval.report import build_report, load_runs, render_markdown, write_report
from routerag.eval.routing import first_decision, routing_outcome
from routerag.eval.runs import QuestionRecord
from routerag.trace import SCHEMA_VERSION, ForcedAnswer, GraphRetrieval, Hit, Route, Selection, Step, SubQueryRef, Trace

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def old(steps: list[dict]) -> Trace:
    return Trace.model_validate({"question": "Q?", "strategy": "s", "steps": [{"index": i, **s} for i, s in enumerate(steps)]})


def test_old_route_select_answer_reflect_steps_map_to_records() -> None:
    trace = old([
        {"kind": "route", "sources": ["b"], "routing_reason": "b fits",
         "metadata": {"subquery_id": "1", "preferred_source": "b", "router": "profile-embedding", "similarity": {"b": 0.5}}},
        {"kind": "search", "sources": ["a", "b"], "metadata": {"subquery_id": "1", "preferred_source": "b",
                                                               "sources": {"a": {"seeds": []}}}},
        {"kind": "select", "sources": ["a", "b"], "kept_doc_ids": ["x:1", "y"],
         "metadata": {"subquery_id": "1", "selector": "llm", "preferred_source": "b", "candidates": 7,
                      "kept_by_source": {"a": 1, "b": 1}, "kept": ["a:x:1", "b:y"], "fallback": "judge said nothing"}},
        {"kind": "answer", "sources": ["a", "b"], "kept_doc_ids": ["x:1", "y"], "answer": "z",
         "metadata": {"subquery_id": "1", "attempt": 0, "success": False, "preferred_source": "b"}},
        {"kind": "reflect", "sources": ["a"], "routing_reason": "try a", "metadata": {"subquery_id": "1", "preferred_source": "a", "failed": []}},
    ])
    route, search, select, answer, reflect = trace.steps
    assert route.route == Route(choice="b", chosen_by="profile-embedding", reason="b fits") and route.sources == []
    assert route.subquery == SubQueryRef(id="1", preferred_source="b")
    assert search.route is None and search.source_details == {"a": GraphRetrieval()}
    assert select.selection == Selection(selector="llm", candidates=7, kept=["x:1", "y"], kept_sources=["a", "b"],
                                         fallback="judge said nothing")
    assert select.selection.kept_by_source() == {"a": 1, "b": 1}
    assert answer.selection == Selection(kept=["x:1", "y"])
    assert answer.subquery == SubQueryRef(id="1", attempt=0, preferred_source="b", success=False)  # a typed field now
    assert reflect.route == Route(choice="a", chosen_by="reflection", reason="try a") and reflect.decision() == ["a"]
    assert [s.decision() for s in trace.steps] == [["b"], ["a", "b"], [], [], ["a"]]
    assert trace.schema_version == SCHEMA_VERSION


def test_old_policy_search_and_forced_answers_map_to_records() -> None:
    trace = old([
        {"kind": "search", "sources": ["graph"], "routing_reason": "learned router: ...; policy chose passage",
         "metadata": {"tags": ["passage"], "raw_query": "q", "router": "learned", "router_scores": {"graph": 0.9}, "policy_mode": "passage"}},
        {"kind": "search", "sources": ["hybrid"], "routing_reason": "policy tags [hybrid]",
         "metadata": {"tags": ["hybrid"], "raw_query": "q", "mode": "hybrid", "mode_cost": 4.0}},
        {"kind": "answer", "answer": "t", "metadata": {"forced": True, "reader": "top_hit_title"}},
        {"kind": "answer", "answer": "t", "metadata": {"forced": True}},
        {"kind": "answer", "answer": "t", "metadata": {"reader": "direct"}},
    ])
    learned, env, top, cue, reader = trace.steps
    assert learned.route == Route(choice="graph", chosen_by="learned", reason="learned router: ...; policy chose passage",
                                  scores={"graph": 0.9}, proposed="passage")
    assert learned.retrieval_cost is None
    assert env.route is not None and env.route.mode == "hybrid" and env.retrieval_cost == 4.0
    assert top.forced == ForcedAnswer(reader="top_hit_title")
    assert cue.forced == ForcedAnswer(reader="policy")
    assert reader.forced is None  # IRCoT's separate reader: not forced


def test_a_new_trace_round_trips_without_the_old_reader() -> None:
    step = Step(index=0, kind="answer", answer="a", forced=ForcedAnswer(), intermediate=True)
    trace = Trace(question="Q?", strategy="s", steps=[step])
    again = Trace.model_validate_json(trace.model_dump_json())
    assert again == trace and again.steps[0].intermediate


def _stored_records() -> list[tuple[Path, dict]]:
    out = []
    for path in sorted(RESULTS.rglob("results.jsonl*")):
        opener = {".gz": gzip.open, ".xz": lzma.open}.get(path.suffix, open)
        with opener(path, "rt", encoding="utf-8") as handle:
            out += [(path, json.loads(line)) for line in handle if line.strip()]
    return out


def _stored_rollouts() -> list[dict]:
    out = []
    for path in sorted(RESULTS.rglob("rollouts.jsonl*")):
        opener = {".gz": gzip.open, ".xz": lzma.open}.get(path.suffix, open)
        with opener(path, "rt", encoding="utf-8") as handle:
            out += [json.loads(line) for line in handle if line.strip()]
    return out


def _old_first_decision(steps: list[dict]) -> list[str]:
    """eval/routing.first_decision as it was over the old layout."""
    return next((list(s["sources"]) for s in steps if s["kind"] in ("route", "search") and s.get("sources")), [])


@pytest.mark.integration  # reads every stored run under docs/results
def test_every_stored_trace_reads_into_the_new_layout() -> None:
    records = _stored_records()
    assert len(records) >= 1500  # the runs the README's results table reads (docs/results/readme-table.yaml)
    kinds = set()
    old_layout = 0
    for path, raw in records:
        record = QuestionRecord.model_validate(raw)
        if "schema_version" in raw["trace"]:  # stored by the typed records (runs since 2026-11-25): read as written
            assert QuestionRecord.model_validate_json(record.model_dump_json()) == record, path  # round trip
            continue
        old_layout += 1
        steps, old_steps = record.trace.steps, raw["trace"]["steps"]
        assert len(steps) == len(old_steps)
        for new, was in zip(steps, old_steps):
            kinds.add(new.kind)
            extras = was.get("metadata", {})
            assert (new.forced is not None) == bool(extras.get("forced") or extras.get("used_fallback"))
            if new.kind == "search":
                assert new.sources == was["sources"] and new.hits == [Hit.model_validate(h) for h in was["hits"]]
            if was.get("kept_doc_ids"):
                assert new.selection is not None and new.selection.kept == was["kept_doc_ids"]
            if was.get("routing_reason"):
                assert new.route is not None and new.route.reason == was["routing_reason"]
        # the routing the report tables are built from: as the old code computed it and stored it
        assert first_decision(record.trace) == _old_first_decision(old_steps), path
        if record.gold_source:
            assert routing_outcome(record.trace, record.gold_source) == record.routing, path
    assert {"search", "answer"} <= kinds  # route/select/reflect steps: the hand-made traces above
    assert old_layout >= 700  # the runs stored before the typed records keep being read


@pytest.mark.parametrize("name", ["current/0p5b", "current/1p5b"])
def test_a_stored_report_rebuilds_byte_identically_from_the_stored_traces(tmp_path, name) -> None:
    """docs/results/current/* were written by ``routerag report`` over the runs of the README's
    results table (docs/results/README.md: the command); rebuilt from the stored traces (old and new
    layout) they are the same, byte for byte."""
    policy, vanilla = {"current/0p5b": ("routerag-sft-gpu-{}-routerag", "{}-vanilla"),
                       "current/1p5b": ("routerag-sft-outcome-1p5b-{}-routerag", "1p5b-{}-vanilla")}[name]
    runs = [r.format(ds) for ds in ("2wiki", "musique", "hotpotqa-distractor")
            for r in (vanilla, policy, "{}-rule", "{}-rule-second")]
    loaded = load_runs([RESULTS / "runs" / r for r in runs])
    report = build_report(loaded, baseline=loaded[0].label)
    files = write_report(report, tmp_path)
    for key, path in files.items():
        assert path.read_bytes() == (RESULTS / name / path.name).read_bytes(), key
    assert render_markdown(report).encode() == (RESULTS / name / "report.md").read_bytes()


def test_stored_training_rollouts_keep_their_charged_cost() -> None:
    """The GRPO rollouts in docs/results (old layout): the environment's charge per search
    (``metadata.mode_cost`` then) is ``Step.retrieval_cost`` now, so the cost reward is unchanged."""
    from routerag.train.rewards import trajectory_cost

    lines = [line for line in _stored_rollouts() if "schema_version" not in line["trace"]]
    assert lines
    searched = 0
    for line in lines:
        trace = Trace.model_validate(line["trace"])
        charged = [s["metadata"]["mode_cost"] for s in line["trace"]["steps"] if s["kind"] == "search"]
        assert [s.retrieval_cost for s in trace.search_steps] == charged
        assert [s.route.mode for s in trace.search_steps if s.route] == [s["metadata"]["mode"] for s in line["trace"]["steps"] if s["kind"] == "search"]
        assert trajectory_cost(trace, "mode_cost") == sum(charged)
        searched += len(charged)
    assert searched > 0


def test_stored_step_extras_map_into_the_typed_fields() -> None:
    """Steps kept a free-form ``metadata`` until its keys that carried meaning got typed fields;
    a stored step's keys land there and the rest (copies of other fields or of the run's params) go."""
    step = Step.model_validate({
        "index": 0, "kind": "decompose", "route": {"choice": "a", "chosen_by": "learned"}, "subquery": {"id": "1"},
        "metadata": {"intermediate": True, "iteration": 2, "subqueries": [{"id": "1", "query": "q1"}, {"id": "2", "query": "#1?",
                     "depends_on": ["1"], "variables": {"#1": "1"}}], "used_fallback": True, "router_model": "m",
                     "success": True, "tags": ["graph"], "raw_query": "q", "strategy_params": {"k": 2}}})
    assert step.intermediate and step.iteration == 2 and [p.id for p in step.plan] == ["1", "2"]
    assert step.plan[1].depends_on == ["1"] and step.plan[1].variables == {"#1": "1"}
    assert step.forced == ForcedAnswer(reader="last_hop") and step.route is not None and step.route.model == "m"
    assert step.subquery == SubQueryRef(id="1", success=True)
    assert "metadata" not in step.model_dump() and not hasattr(step, "metadata")


def test_stored_source_reports_get_their_kind() -> None:
    graph = {"fallback": None, "seeds": [{"node": "Paris", "weight": 1.0}], "top_nodes": [{"node": "d1", "kind": "passage", "score": 0.5}],
             "facts": [{"triple": ["Paris", "capital of", "France"], "score": 0.9, "weight": 1.0}]}
    step = Step.model_validate({"index": 0, "kind": "search", "sources": ["g", "h", "r", "x"], "source_details": {
        "g": graph, "h": {"graph": graph}, "r": {**graph, "remote_url": "http://w", "server_latency_ms": 3.0}, "x": {"foo": 1}}})
    details = step.source_details
    assert set(details) == {"g", "h", "r"}  # a report of no known kind is left out
    assert isinstance(details["g"], GraphRetrieval) and details["g"].seeds[0].node == "Paris"
    assert details["h"].kind == "hybrid" and details["h"].graph == details["g"]
    assert details["r"].kind == "remote" and details["r"].url == "http://w" and details["r"].details == details["g"]
    again = Step.model_validate_json(step.model_dump_json())
    assert again == step and step.model_dump()["source_details"]["g"]["kind"] == "graph"


def test_a_stored_run_with_graph_reports_and_extras_loads() -> None:
    """One stored results file written with the free-form step metadata and untyped graph reports (the shipped 0.5B policy on MuSiQue-50)."""
    path = RESULTS / "runs" / "routerag-sft-gpu-musique-routerag" / "results.jsonl.xz"  # [graph] searches: graph reports
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        raws = [json.loads(line) for line in handle if line.strip()]
    records = [QuestionRecord.model_validate(raw) for raw in raws]
    steps = [s for r in records for s in r.trace.steps]
    raw_steps = [s for raw in raws for s in raw["trace"]["steps"]]
    assert len(steps) == len(raw_steps) and any("metadata" in s for s in raw_steps)
    reports = [d for s in steps for d in s.source_details.values()]
    assert any(isinstance(d, GraphRetrieval) and d.seeds for d in reports) or not any(
        "seeds" in json.dumps(s.get("source_details") or s.get("metadata", {}).get("sources") or {}) for s in raw_steps)
    assert any(s.plan for s in steps) == any("subqueries" in (s.get("metadata") or {}) for s in raw_steps)
