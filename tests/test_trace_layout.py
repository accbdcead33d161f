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
from routerag.trace import SCHEMA_VERSION, ForcedAnswer, Hit, Route, Selection, Step, SubQueryRef, Trace

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
# metadata keys of the old layout that now have a typed home; none may be left in ``metadata``
MOVED = {"forced", "mode", "mode_cost", "router", "router_scores", "policy_mode", "subquery_id", "preferred_source",
         "attempt", "selector", "candidates", "kept", "kept_by_source", "sources", "choice", "scores"}


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
    assert route.subquery == SubQueryRef(id="1", preferred_source="b") and route.metadata == {"similarity": {"b": 0.5}}
    assert search.route is None and search.source_details == {"a": {"seeds": []}} and search.metadata == {}
    assert select.selection == Selection(selector="llm", candidates=7, kept=["x:1", "y"], kept_sources=["a", "b"],
                                         fallback="judge said nothing")
    assert select.selection.kept_by_source() == {"a": 1, "b": 1} and select.metadata == {}
    assert answer.selection == Selection(kept=["x:1", "y"]) and answer.subquery == SubQueryRef(id="1", attempt=0, preferred_source="b")
    assert answer.metadata == {"success": False}
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
    assert learned.metadata == {"tags": ["passage"], "raw_query": "q"} and learned.retrieval_cost is None
    assert env.route is not None and env.route.mode == "hybrid" and env.retrieval_cost == 4.0
    assert top.forced == ForcedAnswer(reader="top_hit_title") and top.metadata == {}
    assert cue.forced == ForcedAnswer(reader="policy")
    assert reader.forced is None and reader.metadata == {"reader": "direct"}  # IRCoT's separate reader: not forced


def test_a_new_trace_round_trips_without_the_old_reader() -> None:
    step = Step(index=0, kind="answer", answer="a", forced=ForcedAnswer(), metadata={"forced": "an extra of some strategy"})
    trace = Trace(question="Q?", strategy="s", steps=[step])
    again = Trace.model_validate_json(trace.model_dump_json())
    assert again == trace and again.steps[0].metadata == {"forced": "an extra of some strategy"}


def _stored_records() -> list[tuple[Path, dict]]:
    out = []
    for path in sorted(RESULTS.rglob("results.jsonl*")):
        opener = {".gz": gzip.open, ".xz": lzma.open}.get(path.suffix, open)
        with opener(path, "rt", encoding="utf-8") as handle:
            out += [(path, json.loads(line)) for line in handle if line.strip()]
    return out


def _old_first_decision(steps: list[dict]) -> list[str]:
    """eval/routing.first_decision as it was over the old layout."""
    return next((list(s["sources"]) for s in steps if s["kind"] in ("route", "search") and s.get("sources")), [])


def test_every_stored_trace_reads_into_the_new_layout() -> None:
    records = _stored_records()
    assert len(records) > 3000
    kinds = set()
    old_layout = 0
    for path, raw in records:
        record = QuestionRecord.model_validate(raw)
        if "schema_version" in raw["trace"]:  # stored by the typed records (runs since session 8): read as written
            assert QuestionRecord.model_validate_json(record.model_dump_json()) == record, path  # round trip
            continue
        old_layout += 1
        steps, old_steps = record.trace.steps, raw["trace"]["steps"]
        assert len(steps) == len(old_steps)
        for new, was in zip(steps, old_steps):
            kinds.add(new.kind)
            assert not MOVED & set(new.metadata), (path, new.index, new.metadata)
            assert (new.forced is not None) == bool(was.get("metadata", {}).get("forced"))
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
    assert {"route", "reflect", "select", "search", "answer"} <= kinds
    assert old_layout > 3000  # the old-layout records stay the bulk of what is stored


@pytest.mark.parametrize("name", ["yardsticks"])
def test_a_stored_report_rebuilds_byte_identically_from_the_stored_traces(tmp_path, name) -> None:
    """docs/results/yardsticks was written by ``routerag report`` over these runs (README: the
    command); rebuilt from the stored (old-layout) traces it is the same, byte for byte."""
    runs = ["2wiki-rule", "2wiki-rule-second", "2wiki-direct", "2wiki-vanilla", "2wiki-routerag", "sft-2wiki-routerag",
            "musique-rule", "musique-rule-second", "musique-direct", "musique-vanilla", "musique-routerag",
            "sft-musique-routerag", "hotpotqa-distractor-rule", "hotpotqa-distractor-rule-second",
            "hotpotqa-distractor-direct", "hotpotqa-distractor-vanilla", "hotpotqa-distractor-routerag"]
    report = build_report(load_runs([RESULTS / "runs" / r for r in runs]))
    files = write_report(report, tmp_path)
    for key, path in files.items():
        assert path.read_bytes() == (RESULTS / name / path.name).read_bytes(), key
    assert render_markdown(report).encode() == (RESULTS / name / "report.md").read_bytes()


def test_stored_training_rollouts_keep_their_charged_cost() -> None:
    """The GRPO rollouts in docs/results (old layout): the environment's charge per search
    (``metadata.mode_cost`` then) is ``Step.retrieval_cost`` now, so the cost reward is unchanged."""
    from routerag.train.rewards import trajectory_cost

    lines = [json.loads(line) for path in sorted(RESULTS.rglob("rollouts.jsonl")) for line in path.read_text().splitlines() if line.strip()]
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
